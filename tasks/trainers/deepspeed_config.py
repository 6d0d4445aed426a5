"""The DeepSpeed section of a trainer: ZeRO stage, optimizer offload, process-group backend.

`ds_config` turns it (with the shared `TrainerConfig`) into DeepSpeed's JSON config. The
trainer owns accumulation (it marks the boundary itself and scales each micro-batch by its
weight), the optimizer (AdamW or DeepSpeedCPUAdam, built by alignflow) and the LR schedule,
so the config only asks DeepSpeed for ZeRO partitioning, clipping and offload.
"""

from __future__ import annotations

import importlib
import logging
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal, get_args

import torch

from alignflow.errors import ConfigError
from alignflow.tasks.trainers.base import TrainerConfig

ZeroStage = Literal[0, 1, 2, 3]
BackendChoice = Literal["auto", "gloo", "nccl"]
STEPS_PER_PRINT_NEVER = 2**31 - 1
TRAINER_OWNED = frozenset({"optimizer", "scheduler", "gradient_accumulation_steps", "bf16",
                           "fp16", "train_batch_size", "managed_gradient_accumulation"})


@dataclass(frozen=True, kw_only=True)
class DeepSpeedConfig:
    """zero_stage: 0 = data parallel only, 1 = shard optimizer state, 2 = + gradients,
    3 = + parameters. adam_offload: keep AdamW state on the CPU and step it with
    DeepSpeedCPUAdam (needs zero_stage >= 1). backend: torch.distributed backend, "auto" =
    NCCL with CUDA, else gloo. overlap_comm: overlap gradient reduction with backward
    (ZeRO 2/3 on GPUs). overrides: merged (nested) into the generated DeepSpeed config, for
    DeepSpeed's own knobs, e.g. {"zero_optimization": {"stage3_param_persistence_threshold":
    0}}; keys the trainer owns (accumulation, optimizer, scheduler) are refused."""

    zero_stage: ZeroStage = 2
    adam_offload: bool = False
    backend: BackendChoice = "auto"
    overlap_comm: bool = False
    overrides: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.zero_stage not in get_args(ZeroStage):
            raise ConfigError(f"DeepSpeedConfig.zero_stage={self.zero_stage!r}: expected one of "
                              f"{get_args(ZeroStage)}")
        if self.backend not in get_args(BackendChoice):
            raise ConfigError(f"DeepSpeedConfig.backend={self.backend!r}: expected one of "
                              f"{get_args(BackendChoice)}")
        if self.adam_offload and self.zero_stage == 0:
            raise ConfigError("DeepSpeedConfig.adam_offload=True: expected zero_stage >= 1 "
                              "(DeepSpeed offloads optimizer state only under ZeRO)")
        owned = sorted(set(self.overrides) & TRAINER_OWNED)
        if owned:
            raise ConfigError(f"DeepSpeedConfig.overrides[{owned[0]!r}]: set by the trainer; "
                              "expected DeepSpeed keys other than " + ", ".join(sorted(TRAINER_OWNED)))


def ds_config(cfg: TrainerConfig, ds: DeepSpeedConfig, *, pin_memory: bool) -> dict[str, Any]:
    """DeepSpeed's config dict. Stage 0 clips in the trainer (DeepSpeed reports no norm there)."""
    zero: dict[str, Any] = {"stage": ds.zero_stage, "overlap_comm": ds.overlap_comm}
    if ds.adam_offload:
        zero["offload_optimizer"] = {"device": "cpu", "pin_memory": pin_memory}
    return _merge({
        "train_micro_batch_size_per_gpu": cfg.micro_train_batch_size,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": max(cfg.max_norm, 0.0) if ds.zero_stage > 0 else 0.0,
        "zero_optimization": zero,
        "zero_allow_untested_optimizer": True,
        "steps_per_print": STEPS_PER_PRINT_NEVER,
        "wall_clock_breakdown": False,
    }, ds.overrides)


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
