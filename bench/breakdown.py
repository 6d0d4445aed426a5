"""Where the seconds and MiB of one `alignflow run` go, per executor (issue 25: measure first).

    .venv/bin/python bench/breakdown.py [--kinds grpo,dpo,sft] [--executors inline,ray]
        [--reps 3] [--examples 128] [--model bench|tiny|smollm2-135m|PATH]
        [--before MAIN_CHECKOUT] [--json OUT]

Runs the command as a user types it, on the work of `bench/peers.py` (5.28M Llama, fp32, one
thread, the same malloc settings), interleaved (order rotated each repetition). Three
sources per run: the process tree sampled every 50 ms (each process's RSS and CPU, named by
role: driver, gcs, raylet, Ray agents, model host / pool actor, other Ray workers), the
phase marks the processes write to `$ALIGNFLOW_TIMELINE` (`alignflow/timeline.py`: Ray start,
config checked, warm imports, model load, flow start/end, shutdown), and the run's
manifests (each task's queue wait, body and the gap before it). Prints one timeline per
run and, per kind and side, medians. `--before DIR` adds the same executors run from
another checkout (its own `.venv/bin/alignflow`), e.g. main, as `before-<executor>` sides.
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

from bench.peer_setup import ENV, Work, build_model, write_data  # noqa: E402
from bench.peers import alignflow_cmd  # noqa: E402

ROLES = (("DashboardAgent", "ray agents"), ("RuntimeEnvAgent", "ray agents"),
         ("dashboard", "ray agents"), ("runtime_env", "ray agents"), ("log_monitor", "ray agents"),
         ("monitor.py", "ray agents"), ("raylet/raylet", "raylet"), ("gcs_server", "gcs"),
         ("ray::", "ray worker"), ("default_worker", "ray worker"))  # first match wins


def role(pid: int, cmdline: list[str], root_pid: int, hosts: set[int]) -> str:
    """A process's part in the run, from its command line (and the timeline's host marks)."""
    if pid == root_pid:
        return "driver"
    if pid in hosts:
        return "model host"
    cmd = " ".join(cmdline)
    return next((name for needle, name in ROLES if needle in cmd), "other")


class TreeSampler(threading.Thread):
    """Samples a process tree every 50 ms: the tree's peak RSS and each process's peak RSS,
    CPU seconds and when it was first and last seen."""

    def __init__(self, pid: int, start: float) -> None:
        super().__init__(daemon=True)
        self.pid, self.t0, self.stop = pid, start, threading.Event()
        self.peak, self.at_peak, self.procs = 0, {}, {}

    def run(self) -> None:
        while not self.stop.wait(0.05):
            try:
                root = psutil.Process(self.pid)
                procs = [root, *root.children(recursive=True)]
            except psutil.Error:
                continue
            total, now = {}, time.time() - self.t0
            for p in procs:
                try:
                    rss, cpu, cmd = p.memory_info().rss, sum(p.cpu_times()[:2]), p.cmdline()
                except psutil.Error:
                    continue
                info = self.procs.setdefault(p.pid, {"first": now, "peak": 0})
                info.update(last=now, cpu=cpu, peak=max(info["peak"], rss), cmd=cmd)
                total[p.pid] = rss
            if sum(total.values()) > self.peak:
                self.peak, self.at_peak = sum(total.values()), total


def one_run(kind: str, side: str, cmd: list[str], store: Path, root: Path) -> dict:
    """Run one command; returns its timeline, per-process figures and task spans."""
    timeline = store.parent / "timeline.jsonl"
    env = dict(os.environ, **ENV, PYTHONPATH=str(root), ALIGNFLOW_TIMELINE=str(timeline))
    start = time.time()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=store.parent, env=env)
    sampler = TreeSampler(proc.pid, start)
    sampler.start()
    first, tail = None, []
    for line in proc.stdout:
        first = first if first is not None else time.time() - start
        tail = [*tail[-20:], line]
    code, whole = proc.wait(), time.time() - start
    sampler.stop.set()
    sampler.join()
    if code:
        raise RuntimeError(f"{' '.join(cmd)} exited {code}:\n{''.join(tail)}")
    marks = [json.loads(x) for x in timeline.read_text().splitlines()] if timeline.exists() else []
    hosts = {m["pid"] for m in marks if m["event"].startswith(("host", "warm"))}
    return {"kind": kind, "executor": side, "whole_s": whole, "first_output_s": first,
            "peak_tree_mib": sampler.peak / 2**20,
            "at_peak_mib": _by_role(sampler, sampler.at_peak, proc.pid, hosts),
            "processes": _processes(sampler, proc.pid, hosts),
            "marks": [dict(m, t=m["t"] - start) for m in marks],
            "tasks": _tasks(store, start), "load": os.getloadavg()[0]}


def _by_role(sampler: TreeSampler, rss: dict, root: int, hosts: set[int]) -> dict[str, float]:
    out: dict[str, float] = {}
    for pid, value in rss.items():
        name = role(pid, sampler.procs[pid]["cmd"], root, hosts)
        out[name] = out.get(name, 0.0) + value / 2**20
    return out


def _processes(sampler: TreeSampler, root: int, hosts: set[int]) -> list[dict]:
    return [{"pid": pid, "role": role(pid, p["cmd"], root, hosts), "first_s": p["first"],
             "last_s": p["last"], "cpu_s": p["cpu"], "peak_mib": p["peak"] / 2**20}
            for pid, p in sorted(sampler.procs.items(), key=lambda kv: kv[1]["first"])]


def _tasks(store: Path, start: float) -> list[dict]:
    from alignflow.artifacts.store import Store
    from alignflow.flows.journal import runs

    manifests = sorted(runs.read_manifests(Store.open(str(store)), "b").values(),
                       key=lambda m: m["seq"])
    out = []
    for m in manifests:
        queued = m.get("queued") or m["started"]
        out.append({"task": m["task_key"], "queued_s": queued - start,
                    "wait_s": m["started"] - queued, "run_s": m["ended"] - m["started"],
                    "ended_s": m["ended"] - start})
    return out


def summary(r: dict) -> dict[str, float]:
    """The run cut into phases along its critical path (seconds)."""
    tasks, marks = r["tasks"], {m["event"]: m["t"] for m in r["marks"]}
    first_q = tasks[0]["queued_s"]
    run_s = sum(t["run_s"] for t in tasks)
    wait_s = sum(t["wait_s"] for t in tasks)
    out = {"whole": r["whole_s"], "to first task queued": first_q,
           "first task queue wait": tasks[0]["wait_s"], "task bodies": run_s,
           "later queue waits": wait_s - tasks[0]["wait_s"],
           "gaps between tasks": tasks[-1]["ended_s"] - first_q - run_s - wait_s,
           "last task end -> exit": r["whole_s"] - max(t["ended_s"] for t in tasks),
           "peak tree MiB": r["peak_tree_mib"]}
    for event in ("config checked", "ray ready", "warm end", "flow start", "shutdown start"):
        if event in marks:
            out[f"mark: {event}"] = marks[event]
    return out


def show(r: dict) -> None:
    print(f"\n{r['kind']} --executor {r['executor']}: whole {r['whole_s']:.2f} s, first output "
          f"{r['first_output_s']:.2f} s, peak RSS of the tree {r['peak_tree_mib']:.0f} MiB "
          f"(at the peak: {', '.join(f'{k} {v:.0f}' for k, v in sorted(r['at_peak_mib'].items()))})"
          f", load {r['load']:.2f}")
    for p in r["processes"]:
        print(f"  pid {p['pid']:>7} {p['role']:11s} seen {p['first_s']:6.2f}-{p['last_s']:6.2f} s"
              f"  cpu {p['cpu_s']:6.2f} s  peak {p['peak_mib']:6.0f} MiB")
    for m in r["marks"]:
        print(f"  {m['t']:7.2f} s  pid {m['pid']:>7}  {m['event']}")
    for name, value in summary(r).items():
        print(f"  {name:28s} {value:8.2f}")


def medians(results: list[dict], kinds: list[str], executors: list[str]) -> str:
    rows = ["| work | executor | " + " | ".join(summary(results[0])) + " |",
            "|---|---|" + "---|" * len(summary(results[0]))]
    for kind in kinds:
        for ex in executors:
            runs = [summary(r) for r in results if r["kind"] == kind and r["executor"] == ex]
            keys = list(runs[0])
            meds = [statistics.median(s.get(k, float("nan")) for s in runs) for k in keys]
            rows.append(f"| {kind} | {ex} | " + " | ".join(f"{v:.2f}" for v in meds) + " |")
    return "\n".join(rows)


def sides_of(executors: list[str], before: str | None,
             before_executors: list[str]) -> dict[str, tuple[Path, str]]:
    """side label -> (checkout, executor): this checkout's, then `before-*` ones."""
    out = {ex: (ROOT, ex) for ex in executors}
    if before:
        out.update({f"before-{ex}": (Path(before).resolve(), ex) for ex in before_executors})
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kinds", default="grpo,dpo,sft")
    p.add_argument("--executors", default="inline,ray")
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--examples", type=int, default=128)
    p.add_argument("--model", default="bench", help="bench (5.28M), tiny, smollm2-135m or a path")
    p.add_argument("--before", help="another checkout to run the same executors from")
    p.add_argument("--before-executors", help="executors to run from --before (default: all)")
    p.add_argument("--json")
    args = p.parse_args()
    executors = args.executors.split(",")
    kinds = args.kinds.split(",")
    sides = sides_of(executors, args.before, (args.before_executors or args.executors).split(","))
    work = Work(examples=args.examples)
    tmp = Path(tempfile.mkdtemp(prefix="bench-breakdown-"))
    model, data = build_model(tmp / "model", args.model), write_data(tmp / "data", work)
    results = []
    for rep in range(args.reps):
        order = list(sides)[rep % len(sides):] + list(sides)[: rep % len(sides)]
        for kind in kinds:
            for side in order:
                root, ex = sides[side]
                out = Path(tempfile.mkdtemp(dir=tmp))
                cmd = alignflow_cmd(kind, model, data[kind], work, out / "store", ex)
                cmd[0] = str(root / ".venv/bin/alignflow")
                results.append(one_run(kind, side, cmd, out / "store", root))
                show(results[-1])
    print(f"\nmedians of {args.reps} interleaved repetitions ({work})")
    print(medians(results, kinds, list(sides)))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))


if __name__ == "__main__":
    main()
