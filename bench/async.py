"""Asynchronous RL benchmark: iterations per minute of GRPO with generation one policy version
ahead (`async.max_staleness=1`) over the synchronous loop, on the same work.

Both modes run the real flow on the Ray executor with generation on a worker of its own
(`async.generator_worker=true` for the synchronous one, which then waits for each batch
before learning and generates nothing while learning) and one torch thread per worker, so
on this 2-core machine the generator and the learner each have one core. Each mode runs in
a child process (its own Ray). From the store's `tasks` view it reports, over the span from
the first generation to the last learn step (Ray start-up and prompt loading left out):
iterations per minute, the generator's and the learner's idle share (1 − busy / span; the
learner is busy in score, reference and learn), and the staleness of the consumed samples.
The span starts when iteration 0's learn step ends (models are loaded and warm by then) and
ends with the last learn step; the iterations counted are the ones learned in it.
`--is-correction` turns the IS correction on in both modes (one more forward per step).

    .venv/bin/python bench/async.py [--model tiny|smollm2] [--iterations 8] [--threads 1]
        [--is-correction] [--keep DIR]

Figures are only worth recording on a quiet machine: the script prints the load average
before and after and marks the result when it was above 2.5.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

SIZES = {"tiny": (8, 4, 64), "smollm2": (4, 4, 48)}  # prompts, samples, max new tokens
MODES = {"sync": ["async.max_staleness=0", "async.generator_worker=true"],
         "async": ["async.max_staleness=1"]}
LEARNER_STEPS = ("score", "reference", "learn")  # the last part of their task keys


def _sets(model: str, iterations: int, threads: int) -> list[str]:
    from alignflow.tasks.zoo.registry import resolve_model

    prompts, samples, tokens = SIZES[model]
    name = "tiny-llama" if model == "tiny" else "smollm2-135m"
    return [f"actor.model_name_or_path={resolve_model(name)}", "data.max_samples=256",
            f"rollout.batch_size={prompts}", f"rollout.n_samples_per_prompt={samples}",
            f"rollout.max_new_tokens={tokens}", "reward.sources=rule:target:e",
            f"train.batch_size={prompts * samples}", f"train.micro_batch_size={prompts}",
            "actor.adam.lr=1e-3", f"train.max_iterations={iterations}",
            f"num_threads={threads}", "train.colocate_all=true"]


def _child(sets: list[str], store: str) -> None:
    """Run one mode (in a child process: its own Ray)."""
    from alignflow.flows.config import load_config
    from alignflow.flows.control import api
    from alignflow.flows.loader import load_flow

    flow, cls = load_flow("grpo")
    api.run(flow, load_config(cls, sets=sets), store=store, executor="ray", seed=0,
            run_id="bench")


def _measure(store: str) -> dict:
    from alignflow.catalog.catalog import Catalog

    with Catalog(store) as cat:
        tasks = cat.sql("SELECT task_key, task, worker, epoch(started) AS t0, epoch(ended) AS "
                        "t1 FROM tasks WHERE run_id = 'bench'").to_pylist()
        stale = cat.sql("SELECT staleness, count(*) AS n FROM rollout_consumption "
                        "GROUP BY 1 ORDER BY 1").to_pylist()
    step = {t["task_key"]: t["task_key"].rsplit("/", 1)[-1] for t in tasks}
    learns = sorted(t["t1"] for t in tasks if step[t["task_key"]] == "learn")
    start, end = learns[0], learns[-1]  # after iteration 0's learn: warm models
    span = end - start

    def busy(t: dict) -> float:  # the part of a task inside the span
        return max(0.0, min(t["t1"], end) - max(t["t0"], start))

    def idle(group: list[dict]) -> float:
        return 1.0 - sum(busy(t) for t in group) / span

    gen = [t for t in tasks if t["worker"] == "rollout"]
    learner = [t for t in tasks if step[t["task_key"]] in LEARNER_STEPS]
    iterations = len(learns) - 1
    return {"iterations": iterations, "span_s": round(span, 2),
            "iterations_per_min": round(60.0 * iterations / span, 3),
            "generator_idle": round(idle(gen), 3), "learner_idle": round(idle(learner), 3),
            "staleness": {str(r["staleness"]): r["n"] for r in stale}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", choices=sorted(SIZES), default="tiny")
    ap.add_argument("--iterations", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--is-correction", action="store_true")
    ap.add_argument("--keep", help="copy each mode's store into this folder")
    ap.add_argument("--child", nargs=2, metavar=("MODE", "STORE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    sets = _sets(args.model, args.iterations, args.threads)
    if args.is_correction:
        sets.append("algo.advantage.is_correction_enable=true")
    if args.child:
        _child(sets + MODES[args.child[0]], args.child[1])
        return
    load_before = os.getloadavg()[0]
    results = {}
    for mode in MODES:
        with tempfile.TemporaryDirectory(prefix=f"alignflow-bench-{mode}-") as store:
            flags = ["--is-correction"] if args.is_correction else []
            subprocess.run([sys.executable, __file__, "--model", args.model, "--iterations",
                            str(args.iterations), "--threads", str(args.threads), *flags,
                            "--child", mode, store], check=True)
            results[mode] = _measure(store)
            if args.keep:
                subprocess.run(["cp", "-r", store, os.path.join(args.keep, mode)], check=True)
    load_after = os.getloadavg()[0]
    ratio = results["async"]["iterations_per_min"] / results["sync"]["iterations_per_min"]
    report = {"model": args.model, "is_correction": args.is_correction, "results": results, "async_over_sync": round(ratio, 3),
              "load_avg": [round(load_before, 2), round(load_after, 2)],
              "quiet": max(load_before, load_after) <= 2.5}
    print(json.dumps(report, indent=2))
    if not report["quiet"]:
        print("load average above 2.5: do not record these figures", file=sys.stderr)


if __name__ == "__main__":
    main()
