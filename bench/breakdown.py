"""Where the seconds and MiB of one `alignflow run` go, per executor (issue 25: measure first).

    .venv/bin/python bench/breakdown.py [--flows grpo,dpo,sft] [--model tiny-llama]
        [--executors inline,ray] [--reps 1] [--json OUT]

Runs the command as a user types it, samples its whole process tree every 50 ms (each
process's RSS, named by role: driver, gcs, raylet, Ray agents, pool/actor workers) and
reads the run's manifests (each task's queue, run and commit times). Prints one timeline
per run — first output, first task queued/started, each task's queue wait, body and gap to
the next, last task to exit — and the peak RSS of the tree and of each role at the tree's
peak. The same malloc settings as the Makefile hold for every side.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CLI = str(ROOT / ".venv/bin/alignflow")
ENV = {"MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824"}
SETS = {
    "grpo": ["data.max_samples=64", "rollout.batch_size=16", "rollout.n_samples_per_prompt=4",
             "rollout.max_new_tokens=32", "reward.sources=rule:target:e",
             "train.max_iterations=4", "train.batch_size=32", "train.micro_batch_size=8",
             "algo.kl.init_coef=0", "num_threads=1"],
    "dpo": ["data.dataset=alignflow:champ-pairs", "data.max_samples=128", "train.batch_size=16",
            "train.micro_batch_size=8", "num_threads=1"],
    "sft": ["data.dataset=alignflow:gsm8k-sft", "data.max_samples=128", "train.batch_size=16",
            "train.micro_batch_size=8", "num_threads=1"],
}
MODEL_KEY = {"grpo": "actor.model_name_or_path", "dpo": "model.model_name_or_path",
             "sft": "model.model_name_or_path"}


def role(proc: psutil.Process, root_pid: int) -> str:
    """A process's part in the run, from its command line."""
    if proc.pid == root_pid:
        return "driver"
    cmd = " ".join(proc.cmdline())
    for needle, name in (("gcs_server", "gcs"), ("raylet", "raylet"),
                         ("dashboard", "ray agents"), ("runtime_env", "ray agents"),
                         ("log_monitor", "ray agents"), ("ray::", "ray workers"),
                         ("default_worker", "ray workers"), ("forkserver", "reward child")):
        if needle in cmd:
            return name
    return "other"


class TreeSampler(threading.Thread):
    """Samples a process tree's RSS by role until stopped; keeps the tree's peak."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.stop = pid, threading.Event()
        self.peak, self.at_peak, self.first_seen = 0, {}, {}

    def run(self) -> None:
        start = time.time()
        while not self.stop.wait(0.05):
            try:
                root = psutil.Process(self.pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            by_role: dict[str, int] = {}
            for p in procs:
                try:
                    name = role(p, self.pid)
                    by_role[name] = by_role.get(name, 0) + p.memory_info().rss
                    self.first_seen.setdefault(name, time.time() - start)
                except psutil.Error:
                    continue
            if sum(by_role.values()) > self.peak:
                self.peak, self.at_peak = sum(by_role.values()), by_role


def one_run(flow: str, model: str, executor: str, store: Path, run_id: str) -> dict:
    from alignflow.artifacts.store import Store
    from alignflow.flows.journal import runs
    from alignflow.tasks.zoo.registry import resolve_model

    cmd = [CLI, "run", flow, "--store", str(store), "--run-id", run_id, "--executor", executor,
           "--set", f"{MODEL_KEY[flow]}={resolve_model(model)}"]
    for item in SETS[flow]:
        cmd += ["--set", item]
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=ROOT, env=dict(os.environ, **ENV))
    sampler = TreeSampler(proc.pid)
    sampler.start()
    first = None
    for _line in proc.stdout:
        first = first if first is not None else time.time() - start
    code, whole = proc.wait(), time.time() - start
    sampler.stop.set()
    sampler.join()
    if code:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}")
    tasks = sorted(runs.read_manifests(Store.open(str(store)), run_id).values(),
                   key=lambda m: m["seq"])
    return {"flow": flow, "executor": executor, "whole_s": whole, "first_output_s": first,
            "tasks": [_span(t, start) for t in tasks],
            "exit_after_last_task_s": start + whole - max(t["ended"] for t in tasks),
            "peak_tree_mib": sampler.peak / 2**20,
            "at_peak_mib": {k: v / 2**20 for k, v in sampler.at_peak.items()},
            "first_seen_s": sampler.first_seen}


def _span(m: dict, start: float) -> dict:
    queued = m.get("queued") or m["started"]
    return {"task": m["task_key"], "queued_s": queued - start,
            "wait_s": m["started"] - queued, "run_s": m["ended"] - m["started"]}


def show(r: dict) -> None:
    print(f"\n{r['flow']} --executor {r['executor']}: whole {r['whole_s']:.2f} s, first output "
          f"{r['first_output_s']:.2f} s, peak RSS of the tree {r['peak_tree_mib']:.0f} MiB "
          f"({', '.join(f'{k} {v:.0f}' for k, v in sorted(r['at_peak_mib'].items()))})")
    print("  processes first seen: " + ", ".join(f"{k} {v:.1f}s" for k, v in
                                                 sorted(r["first_seen_s"].items(),
                                                        key=lambda kv: kv[1])))
    ends = [0.0] + [t["queued_s"] + t["wait_s"] + t["run_s"] for t in r["tasks"]]
    for t, prev_end in zip(r["tasks"], ends, strict=False):
        print(f"  {t['task']:28s} queued {t['queued_s']:7.2f}  gap {t['queued_s'] - prev_end:6.2f}"
              f"  wait {t['wait_s']:6.2f}  run {t['run_s']:6.2f}")
    print(f"  last task end -> exit {r['exit_after_last_task_s']:.2f} s")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--flows", default="grpo,dpo,sft")
    p.add_argument("--model", default="tiny-llama")
    p.add_argument("--executors", default="inline,ray")
    p.add_argument("--reps", type=int, default=1)
    p.add_argument("--json")
    args = p.parse_args()
    tmp, results = Path(tempfile.mkdtemp(prefix="bench-breakdown-")), []
    for rep in range(args.reps):
        for flow in args.flows.split(","):
            for executor in args.executors.split(","):
                r = one_run(flow, args.model, executor, tmp, f"{flow}-{executor}-{rep}")
                results.append(r)
                show(r)
    for flow in args.flows.split(","):
        wholes = {e: statistics.median(r["whole_s"] for r in results if r["flow"] == flow
                                       and r["executor"] == e) for e in args.executors.split(",")}
        print(f"{flow}: " + ", ".join(f"{e} {w:.2f} s" for e, w in wholes.items()) +
              f" (load {os.getloadavg()[0]:.2f})")
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
