"""alignflow vs TRL vs a plain PyTorch floor on identical DPO, SFT and GRPO work.

Every side trains the same 5.28M-parameter Llama on the same data in fp32 with one torch
thread and the same allocator settings (`bench/peer_setup.py`); TRL's bf16 and gradient
checkpointing defaults are off. Each measurement is a fresh process tree, measured from
outside (`bench/peer_measure.py`): whole-command wall time, time to first output, CPU
seconds and peak memory of the whole tree (alignflow's Ray processes included). Loop time:
the floor's and TRL's training loop (`trainer.train()`), alignflow's loop tasks (DPO:
reference + train; SFT: train; GRPO: the iteration's generate, score, learn and sync)
from its manifests. Sides are interleaved, rotating the order every repetition; the load
average is recorded before each run. Medians are printed as one markdown table.

    .venv/bin/python bench/peers.py [--reps 3] [--kinds dpo,sft,grpo]
        [--sides alignflow,trl,floor[,alignflow-ray,alignflow-inline]] [--examples 128]
        [--model bench|tiny|smollm2-135m|PATH] [--tiny] [--json FILE]

Issue 46's targets at a realistic size, one command (TRL from the `bench` extra; prepare
the model first with `alignflow models prepare smollm2-135m`):

    .venv/bin/python bench/peers.py --model smollm2-135m \
        --sides alignflow,alignflow-ray,trl,floor --reps 3 --json /tmp/peers-135m.json

Every side does the same work (`peer_setup.SAME_WORK`, printed with the results): the same
β and reference pass, loss aggregation and number of forward passes. `--tiny` is the CPU
tiny mode the tests run (the offline tiny Llama, a few examples, one repetition).

`alignflow` runs the command as a user types it (`--executor auto`, the default: this work
fits one process, so it runs in the driver); `alignflow-ray` forces in-process Ray
(`--executor ray`), `alignflow-inline` names `--executor inline`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.peer_measure import measure  # noqa: E402
from bench.peer_setup import ENV, Work, build_model, same_work, tiny, write_data  # noqa: E402

LOOP_TASKS = {"dpo": ("reference", "train-"), "sft": ("train-",), "grpo": ("iter-0000/",)}


EXECUTORS = {"alignflow": None, "alignflow-ray": "ray", "alignflow-inline": "inline"}


def alignflow_cmd(kind: str, model: Path, data: Path, work: Work, store: Path,
                  executor: str | None = None) -> list[str]:
    common = ["data.apply_chat_template=false", "num_threads=1"]
    if kind in ("dpo", "sft"):
        sets = [*common, f"model.model_name_or_path={model}", f"adam.lr={work.lr}",
                f"data.dataset={data}", f"data.max_len={work.max_len}", "train.max_epochs=1",
                f"train.batch_size={work.batch}", f"train.micro_batch_size={work.batch}"]
        sets += ["data.input_key=input", "data.output_key=output"] if kind == "sft" else \
            [f"model.beta={work.beta}", "data.prompt_key=prompt"]  # conditioned, as TRL
    else:
        sets = [*common, f"actor.model_name_or_path={model}", f"actor.adam.lr={work.lr}",
                f"data.prompt_dataset={data}", "data.input_key=prompt", "data.label_key=null",
                f"rollout.batch_size={work.prompts}",
                f"rollout.n_samples_per_prompt={work.samples}",
                f"rollout.max_new_tokens={work.new_tokens}",
                f"rollout.micro_batch_size={work.prompts * work.samples}",
                "reward.sources=rule:target:e", "train.max_iterations=1",
                "algo.kl.init_coef=0", "algo.loss_agg=token-mean",
                f"train.batch_size={work.rl_batch}", f"train.micro_batch_size={work.rl_micro}"]
    cmd = [str(ROOT / ".venv/bin/alignflow"), "run", kind, "--store", str(store), "--run-id", "b",
           *(["--executor", executor] if executor else [])]
    for s in sets:
        cmd += ["--set", s]
    return cmd


def alignflow_loop(kind: str, store: Path) -> tuple[float, list[str]]:
    """Seconds of the loop's tasks, and every task key the run committed (which passes
    it made: a `reference` task only where a reference pass is part of the work)."""
    from alignflow.artifacts.store import Store
    from alignflow.flows.journal import runs

    manifests = runs.read_manifests(Store.open(str(store)), "b")
    return sum(m["ended"] - m["started"] for key, m in manifests.items()
               if key.startswith(LOOP_TASKS[kind])), sorted(manifests)


def run_side(side: str, kind: str, model: Path, data: Path, work: Work, tmp: Path) -> dict:
    env = dict(os.environ, **ENV, PYTHONPATH=os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]))
    out = Path(tempfile.mkdtemp(dir=tmp))
    if side in EXECUTORS:
        res = measure(alignflow_cmd(kind, model, data, work, out / "store", EXECUTORS[side]), env,
                      cwd=str(out))
        if res["rc"] == 0:
            res["loop_s"], res["tasks"] = alignflow_loop(kind, out / "store")
    else:
        cmd = [sys.executable, "-m", "bench.peer_side", "--side", side, "--kind", kind,
               "--model", str(model), "--data", str(data), "--work", work.to_json(),
               "--out", str(out / "result.json")]
        res = measure(cmd, env, cwd=str(ROOT))
        if res["rc"] == 0:
            res.update(json.loads((out / "result.json").read_text()))
    if res["rc"] != 0:
        raise RuntimeError(f"{side} {kind} failed (exit {res['rc']}):\n{res['tail']}")
    return res


def _median(results: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in results)


def table(results: dict, kinds: list[str], sides: list[str]) -> str:
    keys = ("wall_s", "loop_s", "first_output_s", "cpu_s", "peak_rss_mib", "sum_peak_rss_mib")
    lines = ["| work | side | command s | loop s | first output s | CPU s | peak RSS MiB "
             "(tree sum) | sum of per-process peaks MiB |", "|---" * 8 + "|"]
    for kind in kinds:
        for side in sides:
            med = [_median(results[kind][side], k) for k in keys]
            lines.append(f"| {kind} | {side} | " + " | ".join(f"{v:.2f}" for v in med[:4]) +
                         f" | {med[4]:.0f} | {med[5]:.0f} |")
        lines += [_ratios(results[kind], kind, sides, ours) for ours in EXECUTORS
                  if ours in sides]
    return "\n".join(lines)


def _ratios(by_side: dict, kind: str, sides: list[str], ours: str) -> str:
    parts = []
    for other, what in (("trl", "TRL"), ("floor", "floor")):
        if other in sides:
            r = {key: _ratio(by_side, ours, other, key) for key in
                 ("wall_s", "loop_s", "cpu_s", "peak_rss_mib", "sum_peak_rss_mib")}
            parts.append(f"vs {what}: command {r['wall_s']}, loop {r['loop_s']}, CPU "
                         f"{r['cpu_s']}, peak RSS {r['peak_rss_mib']} / {r['sum_peak_rss_mib']}")
    return f"| {kind} | {ours} ÷ | " + "; ".join(parts) + " | | | | | |"


def _ratio(by_side: dict, ours: str, other: str, key: str) -> str:
    return f"{_median(by_side[ours], key) / _median(by_side[other], key):.2f}x"


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--kinds", default="dpo,sft,grpo")
    p.add_argument("--sides", default="alignflow,trl,floor")
    p.add_argument("--examples", type=int, default=128)
    p.add_argument("--model", default="bench", help="bench (5.28M), tiny, smollm2-135m or a path")
    p.add_argument("--tiny", action="store_true", help="CPU tiny mode: tiny model and work")
    p.add_argument("--json", help="write every measurement here")
    args = p.parse_args(argv)
    kinds, sides = args.kinds.split(","), _sides(args.sides.split(","))
    work = tiny() if args.tiny else Work(examples=args.examples)
    tmp = Path(tempfile.mkdtemp(prefix="bench-peers-"))
    model = build_model(tmp / "model", "tiny" if args.tiny else args.model)
    data = write_data(tmp / "data", work)
    for kind in kinds:
        print(f"same work, {kind}: {same_work(kind, work)}", flush=True)
    results: dict = {k: {s: [] for s in sides} for k in kinds}
    for rep in range(args.reps):
        order = sides[rep % len(sides):] + sides[: rep % len(sides)]
        for kind in kinds:
            for side in order:
                load = os.getloadavg()[0]
                res = run_side(side, kind, model, data[kind], work, tmp)
                res["load"] = load
                results[kind][side].append(res)
                print(f"rep {rep} {kind} {side}: command {res['wall_s']:.2f}s loop "
                      f"{res['loop_s']:.2f}s cpu {res['cpu_s']:.1f}s peak "
                      f"{res['peak_rss_mib']:.0f} MiB (load {load:.2f})", flush=True)
    loads = [r["load"] for k in kinds for s in sides for r in results[k][s]]
    print(f"\n{args.reps} interleaved repetitions, model {model.name}, {work}, load "
          f"{min(loads):.2f}-{max(loads):.2f}")
    print(table(results, kinds, sides))
    print("\n".join(f"same work, {kind}: {same_work(kind, work)}" for kind in kinds))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1, default=str))
    return results


def _sides(sides: list[str]) -> list[str]:
    """`trl` only where TRL is installed (the `bench` extra), said in one line."""
    import importlib.util

    if "trl" in sides and importlib.util.find_spec("trl") is None:
        print("TRL is not installed (pip install -e '.[bench]'): its side is left out",
              flush=True)
        return [s for s in sides if s != "trl"]
    return sides


if __name__ == "__main__":
    main()
