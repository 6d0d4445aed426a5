"""DeepSpeed ZeRO 0/2/3 vs the torch trainer, LoRA vs full fine-tuning, 1 vs 2 DP workers.

Every variant runs the same DPO work in its own process(es): `--pairs` random token pairs
(prompt 16 + response 24 tokens), micro-batches of `--micro` pairs, one optimizer step per
pass over the pairs, `--steps` timed steps after one warm-up step, 1 torch thread per
process; `-offload` = DeepSpeedCPUAdam (compiled on first use). Reported per variant: mean step time, peak RSS per rank (`ru_maxrss`), checkpoint
bytes, and for 2 workers (torchrun, gloo, ZeRO-2, half the pairs each) the share of the
step spent inside torch.distributed collectives (waiting for the other rank included).

    .venv/bin/python bench/deepspeed_vs_torch.py [--model tiny|smollm2-135m] [--pairs 16] [--steps 5]

Figures are only meaningful on a quiet machine: the script prints the load average first.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# this file is named like the package it measures: keep bench/ off the import path
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
PROMPT, RESPONSE = 16, 24
VARIANTS = {  # name: (trainer, zero stage, lora, world size, adam_offload)
    "torch": ("torch", None, False, 1, False), "ds-zero0": ("deepspeed", 0, False, 1, False),
    "ds-zero2": ("deepspeed", 2, False, 1, False), "ds-zero3": ("deepspeed", 3, False, 1, False),
    "ds-zero2-offload": ("deepspeed", 2, False, 1, True),
    "torch-lora": ("torch", None, True, 1, False),
    "ds-zero2-2workers": ("deepspeed", 2, False, 2, False),
}
COLLECTIVES = ("all_reduce", "reduce_scatter_tensor", "all_gather_into_tensor", "broadcast",
               "all_gather", "reduce_scatter", "barrier")


def _model_dir(name: str) -> str:
    from alignflow.tasks.zoo.registry import resolve_model

    return resolve_model("tiny-llama" if name == "tiny" else name)


def _time_collectives() -> dict[str, float]:
    """Wraps torch.distributed's collectives with wall-clock timers (DeepSpeed calls them)."""
    import torch.distributed as dist

    spent = {"s": 0.0}
    for name in COLLECTIVES:
        fn = getattr(dist, name)

        def timed(*a, _fn=fn, **kw):
            t0 = time.perf_counter()
            try:
                return _fn(*a, **kw)
            finally:
                spent["s"] += time.perf_counter() - t0
        setattr(dist, name, timed)
    return spent


def _trainer(args, variant: str):
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.base import TrainerConfig

    kind, stage, use_lora, _, offload = VARIANTS[variant]
    model = load_causal_lm(_model_dir(args.model))
    if use_lora:
        from alignflow.tasks.modeling import lora

        model = lora.wrap(model, lora.LoraConfig(rank=8, alpha=16))
    cfg = TrainerConfig(lr=1e-6, lr_warmup_ratio=0.0, total_steps=args.steps + 1,
                        train_batch_size=args.pairs, micro_train_batch_size=args.micro)
    if kind == "torch":
        from alignflow.tasks.trainers.torch_trainer import TorchTrainer

        return TorchTrainer(model, cfg)
    from alignflow.tasks.trainers.deepspeed.section import DSConfig
    from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer

    return DeepSpeedTrainer(model, cfg, DSConfig(zero_stage=stage, adam_offload=offload))


def _dpo_work(args, trainer):
    """Micro-batches and a DPO loss over this rank's pairs (global mean, DP-averaged grads)."""
    import torch

    from alignflow.tasks.distributed import reduce
    from alignflow.tasks.losses.preference import dpo_loss
    from alignflow.tasks.modeling.logprobs import sequence_logprobs

    rank, world = reduce.rank_and_size()
    g = torch.Generator().manual_seed(0)
    prompt = torch.randint(4, 400, (args.pairs, PROMPT), generator=g)
    chosen, rejected = (torch.cat([prompt, torch.randint(4, 400, (args.pairs, RESPONSE),
                                                         generator=g)], 1) for _ in range(2))
    mine = slice(rank * args.pairs // world, (rank + 1) * args.pairs // world)
    chosen, rejected = chosen[mine], rejected[mine]
    ref = torch.zeros(len(chosen))  # the reference forward is not the trainer's cost
    scale = 1.0 / args.pairs  # the trainer sums gradients over ranks

    def logp(model, ids):
        return sequence_logprobs(model, ids, torch.ones_like(ids), RESPONSE).sum(-1)

    def loss_fn(model, batch):
        i = batch["idx"]
        pi = logp(model, torch.cat([chosen[i], rejected[i]]))
        out = dpo_loss(*pi.split(len(i)), ref[i], ref[i], beta=0.1)
        return out.loss.sum() * scale, {}

    micro = [{"idx": list(range(s, min(s + args.micro, len(chosen))))}
             for s in range(0, len(chosen), args.micro)]
    return micro, loss_fn


def worker(args) -> None:
    """One rank of one variant: warm-up step, timed steps, checkpoint size; prints JSON."""
    import torch

    torch.set_num_threads(1)
    spent = _time_collectives() if VARIANTS[args.worker][3] > 1 else {"s": 0.0}
    trainer = _trainer(args, args.worker)
    micro, loss_fn = _dpo_work(args, trainer)
    trainer.step(micro, loss_fn, weights=[1.0] * len(micro))
    spent["s"], t0 = 0.0, time.perf_counter()
    for _ in range(args.steps):
        trainer.step(micro, loss_fn, weights=[1.0] * len(micro))
    step_s = (time.perf_counter() - t0) / args.steps
    comm_share = spent["s"] / args.steps / step_s
    nbytes = _checkpoint_bytes(trainer, args.worker)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"variant": args.worker, "rank": int(os.environ.get("RANK", 0)),
                      "step_s": step_s, "comm_share": comm_share,
                      "ckpt_mib": nbytes / 2**20, "peak_rss_mib": rss}), flush=True)


def _checkpoint_bytes(trainer, variant: str) -> int:
    from alignflow.artifacts.store import Store

    with tempfile.TemporaryDirectory(prefix="bench-ds-") as tmp:
        store = Store.open(tmp)
        if VARIANTS[variant][2]:
            from alignflow.tasks.trainers import adapter_checkpoint

            return adapter_checkpoint.save(trainer, store, "ck")
        return trainer.save(store, "ck")


def _launch(args, variant: str) -> list[dict]:
    world = VARIANTS[variant][3]
    script = [str(Path(__file__).resolve()), "--worker", variant, "--model", args.model,
              "--pairs", str(args.pairs), "--micro", str(args.micro), "--steps", str(args.steps)]
    if world == 1:
        cmd = [sys.executable, *script]
    else:
        from alignflow.tasks.distributed.group import free_port

        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc_per_node={world}",
               "--master_addr=127.0.0.1", f"--master_port={free_port()}", *script]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1",
           "MALLOC_MMAP_THRESHOLD_": "33554432", "MALLOC_TRIM_THRESHOLD_": "1073741824"}
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode or not rows:
        raise SystemExit(f"{variant} failed:\n{done.stderr[-3000:]}")
    return rows


def _table(results: dict[str, list[dict]]) -> str:
    base = results["torch"][0]["step_s"] if "torch" in results else None
    lines = ["| variant | ranks | step (s) | vs torch | collectives | ckpt (MiB) | peak RSS/rank (MiB) |",
             "|---|---|---|---|---|---|---|"]
    for name, rows in results.items():
        step = max(r["step_s"] for r in rows)
        ratio = f"{step / base:.2f}x" if base else "-"
        comm = f"{max(r['comm_share'] for r in rows):.0%}" if len(rows) > 1 else "-"
        rss = " / ".join(f"{r['peak_rss_mib']:.0f}" for r in sorted(rows, key=lambda r: r["rank"]))
        lines.append(f"| {name} | {len(rows)} | {step:.3f} | {ratio} | {comm} | "
                     f"{rows[0]['ckpt_mib']:.1f} | {rss} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="tiny")
    parser.add_argument("--pairs", type=int, default=16)
    parser.add_argument("--micro", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args)
    print(f"load average: {os.getloadavg()[0]:.2f} (figures need < 2.5)", file=sys.stderr)
    results = {v: _launch(args, v) for v in args.variants.split(",")}
    print(json.dumps(results))
    print(_table(results))
    print(f"load average after: {os.getloadavg()[0]:.2f}", file=sys.stderr)


if __name__ == "__main__":
    main()
