"""Frozen models (the reference, reward models) held as the actor's ZeRO-3 holds its own.

A model that is never trained needs no optimizer, but a whole replica per GPU beside the
actor's shard is what stops a large reference from fitting: a 32B reference is 64 GB on
every GPU. So when the run's `ds` section trains at ZeRO stage 3, a frozen model becomes a
DeepSpeed engine at stage 3 without an optimizer (OpenRLHF's eval engines do the same,
`utils/deepspeed/deepspeed.py:get_ds_eval_config`): each rank keeps 1/world of every
parameter and gathers a layer's for its forward. With `offload` (`--ref.offload`,
`--reward.offload`) the shards wait in CPU memory (DeepSpeed's parameter offload) and visit
the GPU only for the forward. Other stages keep replicas: without ZeRO-3 there is nothing
to gather from.

Every rank must run the same forwards (each gather is a collective): the RL steps do,
every rank computes the whole batch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from alignflow.tasks.trainers.deepspeed.config import (
    DEEPSPEED_PREFETCH_BUCKET,
    STEPS_PER_PRINT_NEVER,
)
from alignflow.tasks.trainers.deepspeed.section import DSConfig


def shards(ds: DSConfig | None) -> bool:
    """Whether frozen models are sharded under `ds`: DeepSpeed at ZeRO stage 3."""
    return ds is not None and ds.uses_deepspeed and ds.stage == 3


def eval_config(*, dtype: str, offload: bool, params: int | None = None) -> dict[str, Any]:
    """DeepSpeed's config of a frozen ZeRO-3 model: every tensor sharded (the persistence
    threshold 0, as the trainers have it), prefetch no larger than the model, parameters
    on the CPU with `offload`, the weights' dtype (bf16/fp16 modes; fp32 otherwise)."""
    place = {"device": "cpu", "pin_memory": torch.cuda.is_available()} if offload \
        else {"device": "none"}
    zero = {"stage": 3, "stage3_param_persistence_threshold": 0, "offload_param": place,
            "stage3_prefetch_bucket_size": min(DEEPSPEED_PREFETCH_BUCKET, params or
                                               DEEPSPEED_PREFETCH_BUCKET)}
    modes = {"bf16": {"bf16": {"enabled": True}}, "fp16": {"fp16": {"enabled": True}}}
    return {**modes.get(dtype, {}), "train_micro_batch_size_per_gpu": 1,
            "gradient_accumulation_steps": 1, "zero_optimization": zero,
            "steps_per_print": STEPS_PER_PRINT_NEVER, "wall_clock_breakdown": False}


def frozen_engine(load: Callable[[], nn.Module], *, dtype: str, offload: bool) -> Any:
    """The DeepSpeed engine of the frozen model `load()` builds, loaded partitioned (inside
    `zero.Init` through transformers' ZeRO-3 loading: no rank ever holds it whole when
    `load` calls `from_pretrained`; a model built otherwise is partitioned by the engine).
    Call `engine.module` (eval mode, no gradients): its hooks gather each layer in turn."""
    from transformers.integrations import HfDeepSpeedConfig
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    from alignflow.tasks.trainers.deepspeed.trainer import deepspeed, join_deepspeed

    join_deepspeed()
    config = eval_config(dtype=dtype, offload=offload)
    alive = HfDeepSpeedConfig(config)
    try:
        model = load()
    finally:
        unset_hf_deepspeed_config()
        del alive
    model.requires_grad_(False)
    engine, *_ = deepspeed.initialize(model=model.eval(), config=config)
    engine.eval()
    return engine


def local_bytes(model: nn.Module) -> tuple[int, int]:
    """(bytes this rank holds, bytes of the whole model) of `model`'s parameters: a ZeRO-3
    parameter's shard (`ds_tensor`) and full size (`ds_numel`), else the tensor itself."""
    held = whole = 0
    for p in model.parameters():
        shard = getattr(p, "ds_tensor", None)
        held += (shard.numel() if shard is not None else p.numel()) * p.element_size()
        whole += getattr(p, "ds_numel", p.numel()) * p.element_size()
    return held, whole
