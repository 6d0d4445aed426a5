"""Where DeepSpeed ZeRO's one-GPU step spends its time over the plain loop's: the same
micro-batches through ZeRO variants (bucket sizes, overlap, stage 1/0) and a profiler's
top operators for the default, each row's time over the plain loop's in the same run.

    python -m bench.ds_zero_probe --model tiny-llama [--random-layers 20] [--reps 3]
"""

from __future__ import annotations

import argparse
import copy
import json
from typing import Any

import torch

from bench.gpu_throughput import (
    _lm_loss,
    bench_model,
    device_of,
    interleaved,
    learn_setup,
    model_arguments,
    report,
)

VARIANTS: dict[str, tuple[int, Any]] = {  # name: (stage, the model's DeepSpeed overrides)
    "zero2": (2, lambda m: {}),  # the trainer's own buckets (`config.model_buckets`)
    "zero2_hidden2_buckets": (2, lambda m: _zero(reduce_bucket_size=m.config.hidden_size ** 2)),
    "zero2_5e8_buckets": (2, lambda m: _zero(reduce_bucket_size=int(5e8))),
    "zero2_overlap": (2, lambda m: _zero(overlap_comm=True)),
    "zero2_no_contiguous": (2, lambda m: _zero(contiguous_gradients=False)),
    "zero1": (1, lambda m: {}),
    "zero3": (3, lambda m: {}),
    "zero3_hidden2_buckets": (3, lambda m: _zero(
        reduce_bucket_size=m.config.hidden_size ** 2,
        stage3_prefetch_bucket_size=int(0.9 * m.config.hidden_size ** 2))),
}


def _zero(**knobs: Any) -> dict:
    """DeepSpeed overrides of the `zero_optimization` section."""
    return {"zero_optimization": knobs}


def sides(model: Any, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """The plain loop and one DeepSpeed trainer per variant, each on its own model copy."""
    from alignflow.tasks.trainers.deepspeed.section import DSConfig
    from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer

    cfg, batches, plain = learn_setup(model, args, device)
    out = {"plain_loop": plain}
    for name, (stage, overrides_of) in VARIANTS.items():
        if args.only and name not in args.only.split(","):
            continue
        ds = DeepSpeedTrainer(copy.deepcopy(model).to(device), cfg,
                              DSConfig(zero_stage=stage), overrides=overrides_of(model))
        out[name] = (lambda t: lambda: t.step(batches, _lm_loss))(ds)
    return out


def profile_top(fn: Any, device: torch.device, top: int) -> str:
    """The profiler's operators of one call, by self device time then by self CPU time."""
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
    table = prof.key_averages()
    key = "self_cuda_time_total" if device.type == "cuda" else "self_cpu_time_total"
    return (table.table(sort_by=key, row_limit=top) + "\n"
            + table.table(sort_by="self_cpu_time_total", row_limit=top))


def main(argv: list[str] | None = None) -> list[dict]:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    model_arguments(p)
    p.add_argument("--only", help="comma-separated variants (default: all)")
    p.add_argument("--profile", type=int, default=25, help="profiler rows (0: none)")
    args = p.parse_args(argv)
    device = device_of(args)
    fns = sides(bench_model(args).to(device), args, device)
    rows = report("learn", interleaved(fns, args.reps, device), args.rows * args.seq,
                  "plain_loop")
    for row in rows:
        print(json.dumps(row), flush=True)
    if args.profile:
        for name in ("plain_loop", "zero2"):
            if name in fns:
                print(f"== profile: {name}\n" + profile_top(fns[name], device, args.profile))
    return rows


if __name__ == "__main__":
    main()
