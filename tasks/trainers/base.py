"""The trainer contract shared by the plain PyTorch trainer and (later) DeepSpeed ZeRO.

A learn step builds micro-batches and a loss function; the trainer owns the model, the
optimizer, the LR schedule, precision and checkpoints. One `step` call = one optimizer step.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args, runtime_checkable

import torch
from torch import nn

from alignflow.errors import ConfigError

Batch = Mapping[str, Any]
LossFn = Callable[[nn.Module, Batch], tuple[torch.Tensor, dict[str, float]]]
Precision = Literal["fp32", "bf16"]


@dataclass(frozen=True, kw_only=True)
class TrainerConfig:
    """Optimizer, schedule and batching. `total_steps` counts optimizer steps (the schedule's length).

    LR: linear warmup over `ceil(lr_warmup_ratio * total_steps)` steps to `lr` (step i of the
    warmup uses `lr * (i + 1) / warmup`), then a half cosine down to `lr * min_lr_ratio`,
    reached at the last step. `max_norm <= 0` disables clipping (the norm is still reported).
    `dtype="bf16"` autocasts the forward to bfloat16 and keeps fp32 master weights.
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


@runtime_checkable
class Trainer(Protocol):
    """What learn steps and the weight-sync step rely on."""

    model: nn.Module
    global_step: int

    def step(self, micro_batches: Sequence[Batch], loss_fn: LossFn, *,
             weights: Sequence[float] | None = None) -> dict[str, float]:
        """One optimizer step; `sum(weights[i] * loss_i)` is back-propagated (default 1/M each)."""
        ...

    def state_dict_for_sync(self) -> Iterator[tuple[str, torch.Tensor]]:
        """Named full tensors for `GenerationEngine.update_weights`."""
        ...

    def take_part_in_sync(self) -> None:
        """On a rank that drives no engine: the collectives `state_dict_for_sync` makes on
        the driving rank (ZeRO-3's gathers), nothing else."""
        ...

    def save(self, store: Any, rel_dir: str, *, extra: dict | None = None) -> None:
        """Model, optimizer, scheduler, RNG and step count → a checkpoint dir in the store."""
        ...

    def restore(self, store: Any, rel_dir: str) -> dict:
        """The inverse of `save`; returns the `extra` saved with it."""
        ...

    def save_pretrained(self, folder: str, tokenizer: Any = None) -> None:
        """A plain HF folder (safetensors) for serving or a next stage."""
        ...
