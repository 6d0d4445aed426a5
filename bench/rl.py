"""RL benchmark: where a GRPO iteration's time goes, on the real flow, on CPU.

Runs `alignflow.flows.rl.grpo:grpo` (inline executor, local store) for the tiny model and
SmolLM2-135M, each in a child process (so peak RSS is per model), and splits every iteration
into the steps' compute (generate, score, reference, learn, sync) and the store I/O done on
the way, timed by wrapping the store calls in this process (product code is untouched):

- tables: `write_table` / `read_table` / `iter_batches` (Parquet encode + file commit);
- journal: every other `Store` call (manifests, run.json, lease, journal snapshot);
- checkpoints: what the resume checkpoint costs on the critical path: the trainer's
  `snapshot` (RNG and step captured in the learn task) and any wait for a write still
  running (`settle`), plus `checkpoints.load` and checkpoint-folder store calls made there;
- ckpt background: the same calls on the hosts' writer thread (`tasks/steps/saver.py`),
  overlapping the next tasks (not part of the iteration's critical path).

Generation: right after the flow's own `HFEngine.generate` call, the bench calls the same
engine again with the same prompts, params and seed (bitwise-equal output is asserted) and
compares tokens/s of the whole generate step against that bare engine call; the bare call's
time is taken out of the step and the iteration.

    .venv/bin/python bench/rl.py [--models tiny smollm2] [--threads 2]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict

SIZES = {  # model -> (iterations, prompts, samples per prompt, max new tokens)
    "tiny": (6, 8, 4, 64),
    "smollm2": (2, 4, 4, 64),
}
STEPS = ("generate", "score", "reference", "learn", "sync")
EVENTS: list[tuple[float, float, str]] = []  # (start, seconds, kind); outermost calls only
_DEPTH = threading.local()


def _kind(kind: str, args: tuple) -> str:
    """Store calls on checkpoint folders (host.json, pruning old ones) count as checkpoints."""
    rel = args[1] if kind == "journal" and len(args) > 1 else None
    return "checkpoints" if isinstance(rel, str) and "/checkpoints/" in rel else kind


def _timed(kind: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        depth = getattr(_DEPTH, "n", 0)
        _DEPTH.n = depth + 1
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _DEPTH.n = depth
            if depth == 0:
                background = threading.current_thread() is not threading.main_thread()
                EVENTS.append((time.time(), time.perf_counter() - t0,
                               "background" if background else _kind(kind, args)))
    return wrapper


def install_counters() -> None:
    """Wrap the store calls everywhere alignflow bound them (module-level imports too)."""
    import alignflow.flows.rl.grpo  # noqa: F401  (imports every step module first)
    from alignflow.artifacts import checkpoints, parquet_io
    from alignflow.artifacts.store import Store
    from alignflow.tasks.trainers.torch_trainer import TorchTrainer

    for name in ("snapshot", "settle"):
        setattr(TorchTrainer, name, _timed("checkpoints", getattr(TorchTrainer, name)))

    for name in ("exists", "read_bytes", "write_bytes", "put_file", "open_file", "size",
                 "delete", "list", "read_json", "write_json", "create_json"):
        setattr(Store, name, _timed("journal", getattr(Store, name)))
    swaps = {}
    for mod, name, kind in ((parquet_io, "write_table", "tables"),
                            (parquet_io, "read_table", "tables"),
                            (parquet_io, "iter_batches", "tables"),
                            (checkpoints, "save", "checkpoints"),
                            (checkpoints, "load", "checkpoints")):
        swaps[id(getattr(mod, name))] = _timed(kind, getattr(mod, name))
    for mod in [m for n, m in sys.modules.items() if n.startswith("alignflow")]:
        for attr, value in list(vars(mod).items()):
            if id(value) in swaps and callable(value):
                setattr(mod, attr, swaps[id(value)])


def install_engine_probe(records: list[dict]) -> None:
    """After each flow generate call, time the same engine on the same input, bare."""
    from alignflow.tasks.engines.hf import HFEngine

    original = HFEngine.generate

    def timed(self, prompts, params):
        t0, w0 = time.perf_counter(), time.time()
        out = original(self, prompts, params)
        return out, w0, time.perf_counter() - t0

    def generate(self, prompts, params):
        # alternate which call goes first, so warm caches favour neither on average
        if len(records) % 2 == 0:
            out, _, flow_s = timed(self, prompts, params)
            bare, w1, bare_s = timed(self, prompts, params)
        else:
            bare, w1, bare_s = timed(self, prompts, params)
            out, _, flow_s = timed(self, prompts, params)
        EVENTS.append((w1, bare_s, "bench"))
        assert [s.response_ids for s in bare] == [s.response_ids for s in out], "not bitwise"
        records.append({"tokens": sum(len(s.response_ids) for s in out), "engine_s": flow_s,
                        "bare_s": bare_s})
        return out

    HFEngine.generate = generate


def config(model: str, threads: int):
    from alignflow.flows.config import load_config
    from alignflow.flows.rl.config import RLConfig
    from alignflow.tasks.zoo.registry import resolve_model

    iters, prompts, n, tokens = SIZES[model]
    path = resolve_model("tiny-llama" if model == "tiny" else "smollm2-135m")
    return load_config(RLConfig, sets=[
        f"actor.model_name_or_path={path}", f"data.max_samples={prompts * iters}",
        f"rollout.batch_size={prompts}", f"rollout.n_samples_per_prompt={n}",
        f"rollout.max_new_tokens={tokens}", f"rollout.micro_batch_size={prompts * n}",
        "reward.sources=rule:gsm8k", f"train.batch_size={prompts * n}",
        f"train.micro_batch_size={min(prompts * n, 8)}", "actor.adam.lr=1e-6",
        f"train.max_iterations={iters}", f"num_threads={threads}"])


def _sum(events, lo: float, hi: float, kinds: tuple[str, ...]) -> float:
    return sum(dt for t, dt, k in events if lo <= t < hi and k in kinds)


def split_iterations(manifests: dict[str, dict], events, gens: list[dict]) -> list[dict]:
    """Per iteration: wall time, each step's compute (its task time minus the I/O in it),
    the I/O by kind, and the driver's own time ("other")."""
    def ended(key: str) -> float:  # commits may wait for a background checkpoint: use ends
        return manifests[key]["ended"]

    start = ended("prompts")
    out = []
    for it, gen in enumerate(gens):
        k = f"iter-{it:04d}"
        end = ended(f"{k}/sync")
        row = {"iteration": it, "wall": end - start - _sum(events, start, end, ("bench",))}
        for step in STEPS:
            m = manifests.get(f"{k}/{step}")  # no reference step without a KL term
            if m is None:
                row[step] = 0.0
                continue
            row[step] = (m["ended"] - m["started"]) - _sum(
                events, m["started"], m["ended"], ("tables", "journal", "checkpoints", "bench"))
        for kind in ("tables", "journal", "checkpoints", "background"):
            row[kind] = _sum(events, start, end, (kind,))
        row["other"] = row["wall"] - sum(row[s] for s in (*STEPS, "tables", "journal",
                                                          "checkpoints"))
        m = manifests[f"{k}/generate"]
        step_s = (m["ended"] - m["started"]) - gen["bare_s"]
        # the step's own work around the engine call (prompt read, decode, table, write; in
        # iteration 0 also loading the engine's model): less noisy than two timed calls
        overhead = step_s - gen["engine_s"]
        row.update(tokens=gen["tokens"], step_tok_s=gen["tokens"] / step_s,
                   bare_tok_s=gen["tokens"] / gen["bare_s"], gen_overhead=overhead,
                   overhead_ratio=gen["bare_s"] / (gen["bare_s"] + overhead))
        out.append(row)
        start = end
    return out


def child(model: str, threads: int) -> dict:
    import torch

    torch.set_num_threads(threads)
    install_counters()
    gens: list[dict] = []
    install_engine_probe(gens)
    from alignflow.artifacts.store import Store
    from alignflow.flows.control import api
    from alignflow.flows.journal import runs
    from alignflow.flows.rl.grpo import grpo

    cfg = config(model, threads)
    with tempfile.TemporaryDirectory(prefix="alignflow-bench-rl-") as root:
        store = Store.open(root)
        t0 = time.time()
        api.run(grpo, cfg, run_id="bench", store=store, executor="inline", seed=0)
        total = time.time() - t0
        manifests = runs.read_manifests(store, "bench")
    rows = split_iterations(manifests, list(EVENTS), gens)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"model": model, "sizes": SIZES[model], "threads": threads, "total_s": total,
            "peak_rss_mib": rss, "iterations": rows}


def _fmt(res: dict) -> str:
    iters, prompts, n, tokens = res["sizes"]
    lines = [f"\n### {res['model']}: {iters} iterations x {prompts} prompts x {n} samples x "
             f"{tokens} tokens, {res['threads']} threads; run {res['total_s']:.1f} s, peak RSS "
             f"{res['peak_rss_mib']:.0f} MiB",
             "| iter | wall s | " + " | ".join(STEPS) + " | tables | journal | store+journal "
             "share | checkpoints (critical path) | share | ckpt background | other | gen step "
             "tok/s | bare engine tok/s | ratio | step work outside engine s | bare/(bare+that) |",
             "|" + "---|" * 19]
    for r in res["iterations"]:
        io = r["tables"] + r["journal"]
        lines.append(
            f"| {r['iteration']} | {r['wall']:.2f} | "
            + " | ".join(f"{r[s]:.3f}" for s in STEPS)
            + f" | {r['tables']:.3f} | {r['journal']:.3f} | {100 * io / r['wall']:.2f}% | "
              f"{r['checkpoints']:.3f} | {100 * r['checkpoints'] / r['wall']:.2f}% | "
              f"{r['background']:.3f} | {r['other']:.3f} | {r['step_tok_s']:.0f} | "
              f"{r['bare_tok_s']:.0f} | {r['step_tok_s'] / r['bare_tok_s']:.3f} | "
              f"{r['gen_overhead']:.3f} | {r['overhead_ratio']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(SIZES), choices=list(SIZES))
    ap.add_argument("--threads", type=int, default=1,
                    help="torch threads (1: a shared machine makes 2 spin-wait badly)")
    ap.add_argument("--child", choices=list(SIZES), help=argparse.SUPPRESS)
    ap.add_argument("--json", action="store_true", help="print raw JSON results too")
    args = ap.parse_args()
    if args.child:
        print("BENCH-JSON " + json.dumps(child(args.child, args.threads)))
        return
    print(f"bench/rl.py {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    results = defaultdict(dict)
    for model in args.models:
        proc = subprocess.run([sys.executable, __file__, "--child", model, "--threads",
                               str(args.threads)], capture_output=True, text=True, check=False)
        line = [x for x in proc.stdout.splitlines() if x.startswith("BENCH-JSON ")]
        if proc.returncode or not line:
            sys.exit(f"{model}: child failed\n{proc.stderr[-3000:]}")
        results[model] = json.loads(line[-1][len("BENCH-JSON "):])
        print(_fmt(results[model]), flush=True)
        if args.json:
            print(json.dumps(results[model]))
    print(f"load after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
