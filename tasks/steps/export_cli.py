"""`alignflow export RUN --out DIR [--merge-lora]`: a run's final model out of the store.

A run exports its trained model under `runs/<run>/final/<name>/` (`export.export_model`):
a plain HF folder, or for a LoRA run peft's adapter folder. This command copies that folder
to a local directory; `--merge-lora` folds the adapter into its base model and writes a
plain HF folder that loads with `AutoModelForCausalLM.from_pretrained`, without peft.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError

ADAPTER_CONFIG = "adapter_config.json"


def configure(name: str, parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_id", metavar="RUN_ID")
    parser.add_argument("--out", required=True, metavar="DIR", help="local folder to write")
    parser.add_argument("--merge-lora", action="store_true",
                        help="fold a LoRA adapter into its base: a plain HF folder")
    parser.add_argument("--model", metavar="NAME",
                        help="which folder of runs/RUN/final/ (default: the only one)")
    parser.add_argument("--base", metavar="MODEL", help="the adapter's base model (default: "
                        "the one named in its adapter_config.json)")
    parser.add_argument("--force", action="store_true", help="replace a non-empty --out")
    parser.add_argument("--store", help="store URL (default $ALIGNFLOW_STORE or ./alignflow-store)")


def run(name: str, args: argparse.Namespace) -> int:
    store = Store.open(args.store)
    out = Path(args.out)
    if out.exists() and any(out.iterdir()) and not args.force:
        raise ConfigError(f"--out {out}: not empty; expected a new or empty folder (or --force)")
    rel = model_folder(store, args.run_id, args.model)
    with tempfile.TemporaryDirectory(prefix="alignflow-export-") as tmp:
        for path in store.list(rel):
            target = Path(tmp) / Path(path).relative_to(rel)
            target.parent.mkdir(parents=True, exist_ok=True)
            store.get_file(path, str(target))  # streamed; never through a link
        staged = Path(tmp) / "out"
        if args.merge_lora:
            merge_adapter(Path(tmp), staged, base=args.base, what=rel)
        else:
            shutil.copytree(tmp, staged, ignore=shutil.ignore_patterns("out"))
        if out.exists():
            shutil.rmtree(out)
        shutil.move(str(staged), out)
    kind = "merged model" if args.merge_lora else "model"
    print(f"wrote the {kind} of {rel} to {out}")
    return 0


def model_folder(store: Store, run_id: str, name: str | None) -> str:
    """`runs/<run>/final/<name>`: the named one, or the run's only exported folder."""
    final = f"runs/{run_id}/final"
    names = sorted({Path(p).relative_to(final).parts[0] for p in store.list(final)
                    if len(Path(p).relative_to(final).parts) > 1})
    if name is not None:
        if name not in names:
            raise ConfigError(f"--model {name!r}: run {run_id!r} exported {names or 'nothing'} "
                              f"under {final}/; expected one of them")
        return f"{final}/{name}"
    if len(names) != 1:
        raise ConfigError(f"run {run_id!r} exported {names or 'no model'} under {final}/ in "
                          f"{store.url}; expected one (pick with --model, or finish the run)")
    return f"{final}/{names[0]}"


def merge_adapter(adapter_dir: Path, out: Path, *, base: str | None, what: str) -> None:
    """Base model + the adapter in `adapter_dir`, merged, as a plain HF folder in `out`."""
    config = adapter_dir / ADAPTER_CONFIG
    if not config.exists():
        raise ConfigError(f"{what}: holds no LoRA adapter ({ADAPTER_CONFIG} missing); the run "
                          "trained the full model: export it without --merge-lora")
    from peft import PeftModel

    from alignflow.tasks.modeling import lora
    from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
    from alignflow.tasks.zoo.registry import resolve_model

    path = resolve_model(base or json.loads(config.read_text())["base_model_name_or_path"])
    model = PeftModel.from_pretrained(load_causal_lm(path), str(adapter_dir))
    has_tokenizer = (adapter_dir / "tokenizer_config.json").exists()
    tokenizer = load_tokenizer(str(adapter_dir) if has_tokenizer else path)
    lora.save_merged(model, str(out), tokenizer)
