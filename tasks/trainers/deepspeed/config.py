"""DeepSpeed's JSON config from the `ds` section (`ds_section.DSConfig`: ZeRO stage,
optimizer offload, overlap; its keys are declared and checked there, once).

`ds_config` turns it (with the shared `TrainerConfig`) into DeepSpeed's config. The
trainer owns accumulation (it marks the boundary itself and scales each micro-batch by its
weight), the optimizer (AdamW or DeepSpeedCPUAdam, built by alignflow) and the LR schedule,
so the config only asks DeepSpeed for ZeRO partitioning, clipping and offload.
"""

from __future__ import annotations

import importlib
import logging
import os
from types import ModuleType
from typing import Any

import torch

from alignflow.errors import ConfigError
from alignflow.tasks.trainers.config import TrainerConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig

STEPS_PER_PRINT_NEVER = 2**31 - 1
DEEPSPEED_REDUCE_BUCKET = 500_000_000  # elements: DeepSpeed's own defaults
DEEPSPEED_PREFETCH_BUCKET = 50_000_000
TRAINER_OWNED = frozenset({"optimizer", "scheduler", "gradient_accumulation_steps", "bf16",
                           "fp16", "train_batch_size", "managed_gradient_accumulation"})


def check_overrides(overrides: dict[str, Any]) -> None:
    """DeepSpeed's own knobs only: the trainer owns accumulation, optimizer and schedule."""
    owned = sorted(set(overrides) & TRAINER_OWNED)
    if owned:
        raise ConfigError(f"DeepSpeed overrides[{owned[0]!r}]: set by the trainer; expected "
                          "DeepSpeed keys other than " + ", ".join(sorted(TRAINER_OWNED)))


def ds_config(cfg: TrainerConfig, ds: DSConfig, *, pin_memory: bool,
              overrides: dict[str, Any] | None = None,
              trainable: int | None = None, params: int | None = None) -> dict[str, Any]:
    """DeepSpeed's config dict for the `ds` section's stage, offload and overlap, with
    `overrides` merged in (nested) for DeepSpeed's own knobs, e.g. {"zero_optimization":
    {"stage3_param_persistence_threshold": 0}}. Stage 0 clips in the trainer (DeepSpeed
    reports no norm there). With the model's `trainable` and total `params` counts, ZeRO's
    buckets are sized to the model (`model_buckets`) unless the overrides set them."""
    check_overrides(overrides or {})
    zero: dict[str, Any] = {"stage": ds.stage, "overlap_comm": ds.overlap_comm,
                            **model_buckets(ds.stage, trainable, params)}
    if ds.adam_offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": pin_memory}
    return _merge({
        **precision(cfg, ds),
        "train_micro_batch_size_per_gpu": cfg.micro_train_batch_size,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": max(cfg.max_norm, 0.0) if ds.stage > 0 else 0.0,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "steps_per_print": STEPS_PER_PRINT_NEVER,
        "wall_clock_breakdown": False,
    }, overrides or {})


def muon_section(cfg: TrainerConfig) -> dict[str, Any]:
    """DeepSpeed's Muon (>= 0.18.9 honours `muon_lr`/`adam_lr`): Muon on the 2-D tensors
    whose names hold neither `embed` nor `lm_head`, its own AdamW on the rest, one shared
    weight decay, as OpenRLHF 0.11 configures it (DeepSpeed fixes ns_steps 5, Nesterov on);
    Newton-Schulz the standard quintic (torch's; DeepSpeed's default `gram` is another
    iteration) and the auxiliary AdamW torch's, so both trainers step alike."""
    return {"type": "Muon", "params": {
        "lr": cfg.muon_lr, "muon_lr": cfg.muon_lr, "adam_lr": cfg.lr,
        "momentum": cfg.muon_momentum, "betas": list(cfg.betas), "eps": cfg.eps,
        "weight_decay": cfg.weight_decay, "ns_method": "standard",  # torch's quintic NS
        "torch_adam": True}}  # torch's AdamW for the rest: no kernel to JIT-build


def model_buckets(stage: int, trainable: int | None,
                  params: int | None = None) -> dict[str, int]:
    """ZeRO's reduce (and, at stage 3, prefetch) buckets: DeepSpeed's own sizes (what
    OpenRLHF's "auto" leaves), no larger than what they carry: the trainable parameters'
    gradients to reduce, all parameters (a LoRA model's frozen base too) to prefetch.

    Every bucket is a flush (copies, a collective, Python bookkeeping) each micro-batch: on
    one H100 a 164M Llama with the Transformers integration's hidden²-element buckets (~280
    flushes a micro-batch) stepped ZeRO-2 at 2.2-2.4x the plain loop, with one bucket at
    1.4-1.5x; on the CPU the tiny model's ZeRO-3 stepped at 5.9x with hidden² buckets, 3.4x
    with these (bench/ds_zero_probe.py). The cap keeps small models' buffers small:
    DeepSpeed's fixed 5e8 elements are a 2 GB buffer per engine whatever the model (the CPU
    suite, holding one per ZeRO-3 engine it built, could no longer fork)."""
    if stage == 0 or not trainable:
        return {}
    out = {"reduce_bucket_size": min(DEEPSPEED_REDUCE_BUCKET, trainable)}
    if stage == 3:
        out["stage3_prefetch_bucket_size"] = min(DEEPSPEED_PREFETCH_BUCKET,
                                                 max(params or 0, trainable))
    return out


def bf16_module(cfg: TrainerConfig, ds: DSConfig) -> bool:
    """DeepSpeed holds the module in bf16 and fp32 master partitions in its ZeRO optimizer
    (its bf16 mode: ZeRO's gathers and reductions move bf16). Stage 0 (plain data
    parallel, no ZeRO optimizer) keeps fp32 weights under autocast instead."""
    return cfg.dtype == "bf16" and ds.stage > 0


def precision(cfg: TrainerConfig, ds: DSConfig) -> dict[str, Any]:
    return {"bf16": {"enabled": True}} if bf16_module(cfg, ds) else {}


def _merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(out.get(key), dict)
        out[key] = _merge(out[key], value) if both else value
    return out


def import_deepspeed() -> ModuleType:
    """`deepspeed`, imported with `DS_ACCELERATOR=cpu` where CUDA is absent and its INFO logs off.

    DeepSpeed picks its accelerator once, at import; without CUDA it must be told "cpu".
    """
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")
    deepspeed = importlib.import_module("deepspeed")
    deepspeed.utils.logger.setLevel(logging.WARNING)
    return deepspeed
