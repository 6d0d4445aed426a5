"""Fixed costs of the `alignflow` command: first output, time to first task, gaps between
tasks, time to exit; `status` and `ls` on a store with many runs.

    .venv/bin/python bench/startup.py [--runs 100] [--reps 3] [--executors auto,ray]

1. `alignflow run grpo` (tiny-llama, 2 iterations of 8 prompts x 4 samples x 8 tokens; per
   executor: `auto`, the default, runs it in the driver; `ray` on in-process Ray): seconds to the first output line, to the first task's start (from its
   manifest), from the last task's end to the process's exit, and the gaps between
   consecutive tasks (next start - previous end; target <= 50 ms).
2. `alignflow status RUN` and `alignflow ls` on a local store holding `--runs` runs of a
   4-task flow: whole-process seconds (target <= 2 s).
Medians of `--reps`; the load average is printed with each figure.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLI = str(ROOT / ".venv/bin/alignflow")
GRPO = ["data.max_samples=16", "rollout.batch_size=8", "rollout.n_samples_per_prompt=4",
        "rollout.max_new_tokens=8", "reward.sources=rule:target:e", "train.max_iterations=2",
        "num_threads=1", "train.batch_size=16", "train.micro_batch_size=8"]


def _timed(cmd: list[str]) -> tuple[float, float | None, float]:
    """(start time, seconds to the first output line, whole seconds)."""
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=ROOT)
    first = None
    for _line in proc.stdout:
        first = first if first is not None else time.time() - start
    if proc.wait():
        raise RuntimeError(f"{' '.join(cmd)} failed")
    return start, first, time.time() - start


def grpo_run(store: Path, run_id: str, executor: str) -> dict:
    from alignflow.artifacts.store import Store
    from alignflow.flows.journal import runs
    from alignflow.tasks.zoo.registry import resolve_model

    cmd = [CLI, "run", "grpo", "--store", str(store), "--run-id", run_id, "--executor", executor,
           "--set", f"actor.model_name_or_path={resolve_model('tiny-llama')}"]
    for s in GRPO:
        cmd += ["--set", s]
    start, first, whole = _timed(cmd)
    tasks = sorted(runs.read_manifests(Store.open(str(store)), run_id).values(),
                   key=lambda m: m["seq"])
    gaps = [b["started"] - a["ended"] for a, b in zip(tasks, tasks[1:], strict=False)
            if b.get("queued", b["started"]) >= a["ended"]]  # sequential pairs only
    return {"first_output": first, "first_task": tasks[0]["started"] - start,
            "exit_after_last_task": start + whole - max(t["ended"] for t in tasks),
            "whole": whole, "gap_median_ms": 1000 * statistics.median(gaps),
            "gap_max_ms": 1000 * max(gaps)}


def many_runs(store: Path, n: int) -> str:
    from alignflow.flows.control import api
    from tests import flows_for_tests as F

    counts = Path(tempfile.mkdtemp())
    for i in range(n):
        api.run(F.steps, {"dir": str(counts), "n": 4}, store=str(store), run_id=f"r{i:03d}",
                executor="inline")
    return f"r{n - 1:03d}"


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=100)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--executors", default="auto,ray")
    args = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-startup-"))
    for executor in args.executors.split(","):
        grpo = [grpo_run(tmp / "grpo", f"{executor}{i}", executor) for i in range(args.reps)]
        print(f"alignflow run grpo --executor {executor} (tiny, 2 iterations), median of "
              f"{args.reps}, load {os.getloadavg()[0]:.2f}:")
        for key in grpo[0]:
            print(f"  {key}: {statistics.median(g[key] for g in grpo):.3f}")
    last = many_runs(tmp / "many", args.runs)
    for cmd in (["status", last], ["ls"]):
        times = [_timed([CLI, *cmd, "--store", str(tmp / "many")])[2] for _ in range(args.reps)]
        print(f"alignflow {cmd[0]} on {args.runs} runs: median {statistics.median(times):.2f} s "
              f"(load {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
