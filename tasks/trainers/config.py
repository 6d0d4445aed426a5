"""A trainer's settings (optimizer, schedule, batching), apart from the trainer code
(`base.py`), so config checks and plans import no torch. Journalled under its old name
(`alignflow.tasks.trainers.base:TrainerConfig`), so runs recorded before the move resume."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal, get_args

from alignflow.errors import ConfigError

Precision = Literal["fp32", "bf16"]
OptimName = Literal["adam", "muon"]


@dataclass(frozen=True, kw_only=True)
class TrainerConfig:
    """Optimizer, schedule and batching. `total_steps` counts optimizer steps (the schedule's length).

    LR: OpenRLHF's `cosine_with_min_lr` (transformers' `get_cosine_with_min_lr_schedule_with_
    warmup`): step i of the `ceil(lr_warmup_ratio * total_steps)` warmup steps uses
    `lr * i / warmup` (the first is at 0, as OpenRLHF's), then a half cosine from `lr` towards
    `lr * min_lr_ratio`, reached after the last step. `max_norm <= 0` disables clipping (the
    norm is still reported).
    `dtype="bf16"` autocasts the forward to bfloat16 and keeps fp32 master weights.
    `optim="muon"`: Muon (`muon_*`) on the hidden 2-D matrices, AdamW on the rest (`muon.py`).
    """

    lr: float = 1e-5
    betas: tuple[float, float] = (0.9, 0.95)
    eps: float = 1e-8
    weight_decay: float = 0.0
    lr_warmup_ratio: float = 0.03
    min_lr_ratio: float = 0.1
    total_steps: int = 1
    train_batch_size: int = 8
    micro_train_batch_size: int = 1
    max_norm: float = 1.0
    gradient_checkpointing: bool = False
    dtype: Precision = "fp32"
    optim: OptimName = "adam"
    muon_lr: float = 0.02
    muon_momentum: float = 0.95
    muon_nesterov: bool = True
    muon_ns_steps: int = 5

    def __post_init__(self) -> None:
        object.__setattr__(self, "betas", tuple(self.betas))
        checks = [
            (self.lr > 0, "lr", "a float > 0"),
            (len(self.betas) == 2 and all(0 <= b < 1 for b in self.betas), "betas",
             "two floats in [0, 1)"),
            (0.0 <= self.lr_warmup_ratio <= 1.0, "lr_warmup_ratio", "a float in [0, 1]"),
            (0.0 <= self.min_lr_ratio <= 1.0, "min_lr_ratio", "a float in [0, 1]"),
            (self.total_steps >= 1, "total_steps", "an integer >= 1"),
            (self.micro_train_batch_size >= 1, "micro_train_batch_size", "an integer >= 1"),
            (self.train_batch_size % max(self.micro_train_batch_size, 1) == 0,
             "train_batch_size", f"a multiple of micro_train_batch_size={self.micro_train_batch_size}"),
            (self.dtype in get_args(Precision), "dtype", f"one of {get_args(Precision)}"),
            (self.optim in get_args(OptimName), "optim", f"one of {get_args(OptimName)}"),
            (self.muon_lr > 0, "muon_lr", "a float > 0"),
            (0 <= self.muon_momentum < 1, "muon_momentum", "a float in [0, 1)"),
            (1 <= self.muon_ns_steps < 100, "muon_ns_steps", "an integer in [1, 100)"),
        ]
        for ok, name, expected in checks:
            if not ok:
                raise ConfigError(f"TrainerConfig.{name}={getattr(self, name)!r}: expected {expected}")

    @property
    def accumulation_steps(self) -> int:
        return self.train_batch_size // self.micro_train_batch_size

    @property
    def warmup_steps(self) -> int:
        return math.ceil(self.lr_warmup_ratio * self.total_steps)


TrainerConfig.__module__ = "alignflow.tasks.trainers.base"  # its journal name (`flows/journal/codec.py`)
