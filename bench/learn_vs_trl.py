"""TRL's GRPOTrainer and alignflow's GRPO side by side on the demo's task (issue 43): the
same model, prompts, seeds and hyperparameters; held-out greedy accuracy at the start and
after the same number of steps, and each side's wall time and CPU seconds, per seed.

    .venv/bin/python bench/learn_vs_trl.py [--seeds 1,2,3] [--iterations 8]
        [--model smollm2-135m|tiny|PATH] [--sides alignflow,trl] [--trl-python PY]
        [--set KEY=VALUE ...] [--json FILE]

The work is the demo's (`flows/cli/demo.py` DEMO_SETS, read here and turned into TRL's
arguments, so one list sets both sides): `alignflow:arith`, the first `data.max_samples`
training problems in SmolLM2's chat written out, 8 prompts x 8 samples per generation, 16
new tokens ending at the first `rollout.stop` (on TRL's side the tokens holding it join the
EOS ids), temperature 1, the exact answer as the only reward, group-normalised advantages,
PPO clip 0.2 on token-mean losses (TRL `loss_type=dapo`), β 0 on both (no reference
model), AdamW with alignflow's betas, the same warmup + half cosine to `min_lr_ratio` (the
OpenRLHF's `cosine_with_min_lr`, which alignflow builds; TRL the same), two optimizer steps
per generation. HF generation on both sides (alignflow's HF engine on a CPU; TRL without
vLLM), fp32, the same torch thread count and the Makefile's glibc allocator settings.
Differences left: the order in which each side's sampler visits the prompts (both seeded),
each side's random draws, and TRL's loss divisor (the generation's tokens / 2 per step,
alignflow's the step's own tokens: equal when the lengths are).

Each side trains in a fresh process measured from outside (`bench/peer_measure.py`: wall,
CPU seconds and peak RSS of the process tree, model load and save included); the held-out
evaluation (the first `data.max_samples` `test` problems, greedy, ended at the stop,
`rule:correct`'s check) runs afterwards here, the same code for the start model and both
trained ones, outside the timings.
TRL runs in its own venv (`.venv-trl`, `make bench-trl`); without one the TRL side is
left out, said in one line. Each side's per-step log (reward per generation, loss, grad
norm, lr) is printed per seed as curves and kept in `--json`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.learn_vs_trl_sides import prompts, settings, train_alignflow, train_trl  # noqa: E402
from bench.peer_measure import measure  # noqa: E402

TRL_VENV = ROOT / ".venv-trl"
ENV = {"TOKENIZERS_PARALLELISM": "false", "TRANSFORMERS_VERBOSITY": "error",
       "MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824"}


def cut(text: str, stops: tuple[str, ...]) -> str:
    """`text` up to and with its first stop string, as `rollout.stop` ends a response (and
    the in-run evaluation's): greedy tokens after it do not change those before it."""
    ends = [i + len(s) for s in stops if (i := text.find(s)) >= 0]
    return text[:min(ends)] if ends else text


def evaluate(cfg, model_dir: str, rows: list[dict]) -> float:
    """Held-out greedy accuracy of `model_dir`: one left-padded batch, HF generate, each
    answer ended at `rollout.stop` as alignflow's evaluation ends it."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from alignflow.tasks.rewards.answers import is_correct

    tok = AutoTokenizer.from_pretrained(model_dir, padding_side="left")
    tok.pad_token = tok.pad_token or tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(model_dir).eval()
    enc = tok([r["prompt"] for r in rows], return_tensors="pt", padding=True,
              add_special_tokens=False)
    with torch.no_grad():
        gen = model.generate(**enc, do_sample=False, max_new_tokens=cfg.rollout.max_new_tokens,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    texts = [cut(t, cfg.rollout.stop) for t in tok.batch_decode(
        gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True)]
    return sum(is_correct(t, r["label"]) for t, r in zip(texts, rows, strict=True)) / len(rows)


def _side_cmd(side: str, python: str, a: argparse.Namespace, seed: int, out: Path) -> list[str]:
    return [python, str(Path(__file__).resolve()), "--one", side, "--seeds", str(seed),
            "--iterations", str(a.iterations), "--model", a.model_path,
            "--threads", str(a.threads), "--out", str(out), *(f"--set={s}" for s in a.sets)]


def run_side(side: str, python: str, a: argparse.Namespace, seed: int, cfg) -> dict:
    """Train one side in a fresh, measured process; evaluate its model here."""
    out = Path(tempfile.mkdtemp(prefix=f"learn-{side}-{seed}-", dir=a.tmp))
    env = dict(os.environ, **ENV, OMP_NUM_THREADS=str(a.threads),
               PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    load = os.getloadavg()[0]
    res = measure(_side_cmd(side, python, a, seed, out), env, cwd=str(out))
    if res["rc"] != 0:
        raise RuntimeError(f"{side} seed {seed} failed (exit {res['rc']}):\n{res['tail']}")
    info = json.loads((out / "side.json").read_text())
    end = evaluate(cfg, info["model"], prompts(cfg, "test"))
    shutil.rmtree(out, ignore_errors=True)  # a 135M alignflow store holds ~5 GB of checkpoints
    return {"seed": seed, "side": side, "load": load, **info, "end": end,
            **{k: res[k] for k in ("wall_s", "cpu_s", "peak_rss_mib")}}


def trl_python(given: str | None) -> str | None:
    """The interpreter with TRL: `--trl-python`, else `.venv-trl`, else this one if it has
    TRL; None (the side left out) otherwise."""
    import importlib.util

    for py in (given, TRL_VENV / "bin" / "python"):
        if py and Path(py).exists():  # absolute: each side runs in its own folder
            return os.path.abspath(py)  # (not resolve(): a venv's python is a link)
    return sys.executable if importlib.util.find_spec("trl") else None


def table(rows: list[dict], start: float, n_eval: int) -> str:
    lines = [f"held-out greedy accuracy on {n_eval} problems; start (both sides): {start:.3f}",
             "| seed | side | start | end | command s | CPU s | peak RSS MiB | load |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {r['seed']} | {r['side']} | {start:.3f} | {r['end']:.3f} | {r['wall_s']:.0f} "
              f"| {r['cpu_s']:.0f} | {r['peak_rss_mib']:.0f} | {r['load']:.1f} |" for r in rows]
    for side in dict.fromkeys(r["side"] for r in rows):
        mine = [r for r in rows if r["side"] == side]
        ends = [r["end"] for r in mine]
        lines.append(f"{side}: end accuracy mean {statistics.mean(ends):.3f} (range "
                     f"{min(ends):.3f}-{max(ends):.3f}); mean command "
                     f"{statistics.mean(r['wall_s'] for r in mine):.0f}s, CPU "
                     f"{statistics.mean(r['cpu_s'] for r in mine):.0f}s")
    return "\n".join(lines)


def per_generation(row: dict) -> list[dict]:
    """A side's log as one entry per generation: alignflow logs per iteration already;
    TRL's optimizer steps are grouped (its reward is logged on the steps that generated)."""
    log = row.get("log") or []
    if row["side"] != "trl" or not log:
        return log
    k = max(len(log) // max(row["generations"], 1), 1)
    out = []
    for g in range(0, len(log), k):
        steps = log[g:g + k]
        out.append({key: statistics.mean(s[key] for s in steps if key in s)
                    for key in ("reward", "lr", "grad_norm", "loss", "length")
                    if any(key in s for s in steps)})
    return out


def curves(rows: list[dict]) -> str:
    """Per seed and side: each generation's mean training reward, lr, grad norm and loss
    (means over its optimizer steps); then whether the lr (the one deterministic curve)
    is the same on both sides, and where it first parts."""
    lines = ["per generation: training reward | lr | grad norm (before clipping) | loss"]
    by_seed: dict[int, dict[str, list[dict]]] = {}
    for r in rows:
        gens = by_seed.setdefault(r["seed"], {})[r["side"]] = per_generation(r)
        cells = [" ".join(f"{g.get(k, float('nan')):{f}}" for g in gens)
                 for k, f in (("reward", ".3f"), ("lr", ".2e"), ("grad_norm", ".2f"),
                              ("loss", ".4f"))]
        lines.append(f"seed {r['seed']} {r['side']}: " + " | ".join(cells))
    for seed, sides in by_seed.items():
        if len(sides) == 2:
            a, b = sides.values()
            parts = [i for i, (x, y) in enumerate(zip(a, b, strict=False))
                     if not math.isclose(x.get("lr", 0), y.get("lr", -1), rel_tol=1e-6)]
            lines.append(f"seed {seed}: lr the same on both sides" if not parts and
                         len(a) == len(b) else f"seed {seed}: lr parts at generation "
                         f"{parts[0] if parts else min(len(a), len(b))}")
    return "\n".join(lines)


def _one(a: argparse.Namespace) -> None:
    """One side's training, in this process (the measured child)."""
    import torch

    torch.set_num_threads(a.threads)
    cfg = settings(a.model, a.iterations, a.threads, a.sets)
    train = train_trl if a.one == "trl" else train_alignflow
    info = train(cfg, int(a.seeds), Path(a.out))
    (Path(a.out) / "side.json").write_text(json.dumps(info))


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seeds", default="1,2,3")
    p.add_argument("--iterations", type=int, default=8, help="generations (2 steps each)")
    p.add_argument("--model", default="smollm2-135m", help="a zoo name or a model folder")
    p.add_argument("--sides", default="alignflow,trl")
    p.add_argument("--trl-python", help="the interpreter with TRL (default .venv-trl's)")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help="override a demo setting on both sides")
    p.add_argument("--json", help="write the rows here")
    p.add_argument("--one", choices=["alignflow", "trl"], help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> list[dict]:
    a = parse(argv)
    if a.one:
        _one(a)
        return []
    from alignflow.tasks.zoo.registry import resolve_model

    a.model_path = str(resolve_model("tiny-llama" if a.model == "tiny" else a.model))
    a.tmp = tempfile.mkdtemp(prefix="bench-learn-vs-trl-")
    cfg = settings(a.model_path, a.iterations, a.threads, a.sets)
    pythons = {"alignflow": sys.executable, "trl": trl_python(a.trl_python)}
    sides = [s for s in a.sides.split(",") if pythons[s]]
    if len(sides) < len(a.sides.split(",")):
        print("TRL is not installed (make bench-trl builds .venv-trl): its side is left out")
    test = prompts(cfg, "test")
    try:  # the trained models (~0.5 GB each at 135M) go with the temp folder
        start = evaluate(cfg, a.model_path, test)
        print(f"start: held-out greedy accuracy {start:.3f} ({len(test)} problems)", flush=True)
        rows = []
        for seed in map(int, a.seeds.split(",")):
            for side in sides:
                rows.append(run_side(side, pythons[side], a, seed, cfg))
                rows[-1]["generations"] = a.iterations
                print(json.dumps({k: v for k, v in rows[-1].items() if k != "log"}), flush=True)
    finally:
        shutil.rmtree(a.tmp, ignore_errors=True)
    print(table(rows, start, len(test)))
    print(curves(rows))
    if a.json:
        Path(a.json).write_text(json.dumps({"start": start, "rows": rows}, indent=1))
    return [{**r, "start": start} for r in rows]


if __name__ == "__main__":
    main()
