"""DPO and SFT training throughput on CPU: alignflow's durable flows vs TRL's trainers.

Same model, same synthetic data (plain text, no chat template), same batch size, max
length and one epoch, in the same run; each measurement runs in its own process so its peak
RSS is its own. Tokens = prompt + response tokens of every consumed sequence (for DPO the
prompt counts twice: chosen and rejected); both sides get the same count, so the ratio is
the ratio of training times. alignflow's time = its train tasks + its reference task
(durations from the manifests); TRL's = `train_runtime`.

    .venv/bin/python bench/offline.py [--model tiny|smollm2-135m] [--pairs 64] [--batch 8]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORDS = ["the", "cat", "sat", "on", "a", "mat", "while", "two", "dogs", "ran", "far", "into", "green", "hills", "and", "seven", "birds", "sang", "old", "songs", "of", "rain", "sun", "wind", "snow", "light", "dark", "river", "stone", "tree"]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def make_data(folder: Path, pairs: int, words: int) -> dict[str, Path]:
    rng = random.Random(0)
    rows = [{"prompt": _text(rng, words), "chosen": " " + _text(rng, words),
             "rejected": " " + _text(rng, words)} for _ in range(pairs)]
    paths = {"dpo": folder / "pairs.jsonl", "sft": folder / "sft.jsonl"}
    paths["dpo"].write_text("".join(json.dumps(r) + "\n" for r in rows))
    paths["sft"].write_text("".join(json.dumps({"input": r["prompt"], "output": r["chosen"]})
                                    + "\n" for r in rows))
    return paths


def model_dir(name: str) -> str:
    from alignflow.tasks.zoo.registry import resolve_model

    return resolve_model("tiny-llama" if name == "tiny" else name)


def count_tokens(model: str, path: Path, kind: str) -> int:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    n = 0
    for line in path.read_text().splitlines():
        r = json.loads(line)
        def ids(t: str) -> int:
            return len(tok(t, add_special_tokens=False)["input_ids"])
        n += (2 * ids(r["prompt"]) + ids(r["chosen"]) + ids(r["rejected"]) if kind == "dpo"
              else ids(r["input"]) + ids(r["output"]))
    return n


def run_alignflow(kind: str, model: str, data: Path, batch: int, max_len: int) -> float:
    from alignflow.catalog.catalog import Catalog
    from alignflow.flows import api
    from alignflow.flows.config import load_config
    from alignflow.flows.loader import load_flow

    flow, cls = load_flow(kind)
    sets = [f"model.model_name_or_path={model}", f"data.dataset={data}",
            "data.apply_chat_template=false", f"data.max_len={max_len}",
            f"train.batch_size={batch}", f"train.micro_batch_size={batch}", "num_threads=1",
            "adam.lr=1e-5"]
    store = tempfile.mkdtemp(prefix="bench-offline-")
    api.run(flow, load_config(cls, sets=sets), store=store, executor="inline", run_id="b")
    rows = Catalog(store).sql("SELECT sum(duration) AS s FROM tasks WHERE run_id = 'b' AND "
                              "(task_key LIKE 'train-%' OR task_key = 'reference')").to_pylist()
    return float(rows[0]["s"])


def run_trl(kind: str, model: str, data: Path, batch: int, max_len: int) -> float:
    import datasets
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(model)
    lm = AutoModelForCausalLM.from_pretrained(model)
    ds = datasets.load_dataset("json", data_files=str(data), split="train")
    common = dict(output_dir=tempfile.mkdtemp(), per_device_train_batch_size=batch,
                  gradient_accumulation_steps=1, num_train_epochs=1, learning_rate=1e-5,
                  max_length=max_len, use_cpu=True, report_to=[], save_strategy="no",
                  logging_steps=10_000, dataloader_num_workers=0)
    if kind == "dpo":
        from trl import DPOConfig, DPOTrainer
        ref = AutoModelForCausalLM.from_pretrained(model)  # explicit: prepared configs
        trainer = DPOTrainer(model=lm, ref_model=ref, args=DPOConfig(**common, beta=0.1),
                             train_dataset=ds, processing_class=tok)  # lack `architectures`
    else:
        from trl import SFTConfig, SFTTrainer
        ds = ds.map(lambda r: {"prompt": r["input"], "completion": r["output"]},
                    remove_columns=["input", "output"])
        trainer = SFTTrainer(model=lm, args=SFTConfig(**common, packing=False), train_dataset=ds,
                             processing_class=tok)
    return float(trainer.train().metrics["train_runtime"])


def one(args) -> None:
    import torch

    torch.set_num_threads(1)
    fn = run_alignflow if args.one.startswith("alignflow") else run_trl
    kind = args.one.split("-")[1]
    start = time.perf_counter()
    seconds = fn(kind, args.model_path, Path(args.data), args.batch, args.max_len)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "wall": time.perf_counter() - start, "rss_mib": rss}))


def measure(which: str, model: str, data: Path, args) -> dict:
    cmd = [sys.executable, __file__, "--one", which, "--model-path", model, "--data", str(data),
           "--batch", str(args.batch), "--max-len", str(args.max_len)]
    env = dict(os.environ, MALLOC_MMAP_THRESHOLD_="33554432",
               MALLOC_TRIM_THRESHOLD_="1073741824", TOKENIZERS_PARALLELISM="false")
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"{which} failed: {out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="tiny")
    p.add_argument("--pairs", type=int, default=64)
    p.add_argument("--words", type=int, default=24)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--max-len", type=int, default=256)
    p.add_argument("--one"), p.add_argument("--model-path"), p.add_argument("--data")
    args = p.parse_args()
    if args.one:
        return one(args)
    model = model_dir(args.model)
    folder = Path(tempfile.mkdtemp(prefix="bench-offline-data-"))
    paths = make_data(folder, args.pairs, args.words)
    print(f"model {args.model}, {args.pairs} examples, batch {args.batch}, 1 epoch, 1 thread")
    print("| kind | tokens | alignflow tok/s | TRL tok/s | ratio | peak RSS alignflow / TRL |")
    print("|---|---|---|---|---|---|")
    for kind in ("dpo", "sft"):
        tokens = count_tokens(model, paths[kind], kind)
        a = measure(f"alignflow-{kind}", model, paths[kind], args)
        t = measure(f"trl-{kind}", model, paths[kind], args)
        print(f"| {kind.upper()} | {tokens} | {tokens / a['seconds']:,.0f} | "
              f"{tokens / t['seconds']:,.0f} | {t['seconds'] / a['seconds']:.2f}x | "
              f"{a['rss_mib']:.0f} / {t['rss_mib']:.0f} MiB |", flush=True)


if __name__ == "__main__":
    main()
