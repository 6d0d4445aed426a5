"""How a GRPO run's cost grows with its length (issue 25): time per iteration at 1, 4, 16 and
64 iterations, and what reading a finished 64-iteration run back costs.

    .venv/bin/python bench/scaling.py [--iterations 1,4,16,64] [--executor inline] [--reps 1]

The peers model (5.28M Llama, `bench/peer_setup.py`), small iterations (8 prompts x 4
samples x 16 tokens, one optimizer step) so that fixed per-iteration costs that grow
(journal, catalog, checkpoint pruning, logging) are not hidden by the work. Per run: the
mean time of an iteration (iteration k starts when its first task is queued and ends when
the next one starts; iteration 0, which loads the model, is left out), and for the longest
run the first and last four iterations side by side. Then, on the longest run:
`alignflow status`, `alignflow resume` (a finished run: refused after reading run.json) and
`alignflow resume --rerun-from export` (replays every committed task, then runs `export`
again), each as a whole command; for the last, the time until `export` starts.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.peer_setup import ENV, build_model  # noqa: E402

CLI = str(ROOT / ".venv/bin/alignflow")
PROMPTS, SAMPLES, TOKENS = 8, 4, 16


def write_prompts(path: Path, count: int) -> Path:
    path.write_text("".join(json.dumps({"prompt": f"Question {i}: say e. Answer:"}) + "\n"
                            for i in range(count)))
    return path


def grpo_cmd(model: Path, data: Path, store: Path, iterations: int, executor: str) -> list[str]:
    sets = ["data.apply_chat_template=false", "num_threads=1", f"actor.model_name_or_path={model}",
            f"data.prompt_dataset={data}", "data.input_key=prompt", "data.label_key=null",
            f"rollout.batch_size={PROMPTS}", f"rollout.n_samples_per_prompt={SAMPLES}",
            f"rollout.max_new_tokens={TOKENS}", f"rollout.micro_batch_size={PROMPTS * SAMPLES}",
            "reward.sources=rule:target:e", f"train.max_iterations={iterations}",
            f"train.batch_size={PROMPTS * SAMPLES}", f"train.micro_batch_size={PROMPTS * SAMPLES}"]
    cmd = [CLI, "run", "grpo", "--store", str(store), "--run-id", "s", "--executor", executor]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def timed(cmd: list[str]) -> tuple[float, float, str]:
    """(start time, seconds, output) of one command (the allocator settings of every bench)."""
    start = time.time()
    out = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ, **ENV))
    if out.returncode not in (0, 2):
        raise RuntimeError(f"{' '.join(cmd)} exited {out.returncode}:\n{out.stderr[-2000:]}")
    return start, time.time() - start, out.stderr + out.stdout


def iteration_times(store: Path) -> list[float]:
    """Seconds of each iteration, from the run's manifests."""
    from alignflow.artifacts.store import Store
    from alignflow.flows.journal import runs

    manifests = runs.read_manifests(Store.open(str(store)), "s")
    starts: dict[int, float] = {}
    for key, m in manifests.items():
        if key.startswith("iter-"):
            it = int(key[5:9])
            starts[it] = min(starts.get(it, float("inf")), m.get("queued") or m["started"])
    end = max(m["ended"] for k, m in manifests.items() if k.startswith("iter-"))
    order = sorted(starts)
    return [starts.get(n, end) - starts[i]
            for i, n in zip(order, [*order[1:], None], strict=True)]


def read_back(store: Path) -> dict[str, float]:
    """Whole-command seconds of status / resume / replay on the finished run."""
    out = {"status": timed([CLI, "status", "s", "--store", str(store)])[1],
           "resume (finished: refused)": timed([CLI, "resume", "s", "--store", str(store)])[1]}
    start, whole, _ = timed([CLI, "resume", "s", "--store", str(store), "--rerun-from", "export"])
    from alignflow.artifacts.store import Store
    from alignflow.flows.journal import runs

    export = runs.read_manifests(Store.open(str(store)), "s")["export"]
    out["replay, command start -> export starts"] = (export.get("queued") or export["started"]) - start
    out["replay + export, whole command"] = whole
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--iterations", default="1,4,16,64")
    p.add_argument("--executor", default="inline")
    args = p.parse_args()
    counts = [int(n) for n in args.iterations.split(",")]
    tmp = Path(tempfile.mkdtemp(prefix="bench-scaling-"))
    model = build_model(tmp / "model")
    data = write_prompts(tmp / "prompts.jsonl", PROMPTS * max(counts))
    rows = []
    for n in counts:
        store = tmp / f"store-{n}"
        _, whole, _ = timed(grpo_cmd(model, data, store, n, args.executor))
        times = iteration_times(store)
        warm = times[1:] or times
        rows.append((n, whole, times[0], statistics.mean(warm), statistics.median(warm)))
        print(f"{n} iterations: whole {whole:.2f} s, iteration 0 {times[0]:.3f} s, later "
              f"mean {rows[-1][3]:.3f} s / median {rows[-1][4]:.3f} s (load "
              f"{os.getloadavg()[0]:.2f})", flush=True)
        if n == max(counts) and n >= 9:
            print(f"  iterations 1-4 mean {statistics.mean(times[1:5]):.3f} s, last 4 mean "
                  f"{statistics.mean(times[-4:]):.3f} s")
    base = next((r for r in rows if r[0] == 4), rows[0])
    for n, _, _, mean, median in rows:
        print(f"| {n} | {mean:.3f} | {median:.3f} | {mean / base[3]:.2f}x |")
    for name, secs in read_back(tmp / f"store-{max(counts)}").items():
        print(f"{name}: {secs:.2f} s")


if __name__ == "__main__":
    main()
