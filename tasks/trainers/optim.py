"""The optimiser and schedule section every training flow shares (`optim.*`).

One AdamW with a warmup-cosine schedule, and how examples become optimizer steps:
`train_batch_size` examples per step, split into `micro_train_batch_size` micro-batches,
`max_epochs` passes. `trainer(total_steps, model)` turns it into the `TrainerConfig` the
trainers take; RL flows add the critic's learning rate (`RLOptimConfig`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.errors import ConfigError
from alignflow.tasks.modeling.model_config import ModelConfig
from alignflow.tasks.trainers.base import TrainerConfig


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """AdamW, its schedule and batching (OpenRLHF's names)."""

    learning_rate: float = 5e-7
    train_batch_size: int = 8
    micro_train_batch_size: int = 1
    max_epochs: int = 1
    lr_warmup_ratio: float = 0.03
    min_lr_ratio: float = 0.1
    max_norm: float = 1.0
    l2: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.95)
    packing_samples: bool = field(default=False, metadata={
        "help": "pack each micro-batch into one row (no padding); pays off with varlen "
                "attention kernels (GPU), not on CPU where the block mask costs full attention"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))
        if self.max_epochs < 1:
            raise ConfigError(f"optim.max_epochs={self.max_epochs}: expected >= 1")
        if self.micro_train_batch_size < 1 or self.train_batch_size % self.micro_train_batch_size:
            raise ConfigError(f"optim.train_batch_size={self.train_batch_size}: expected a "
                              f"multiple of micro_train_batch_size={self.micro_train_batch_size}")

    def trainer(self, total_steps: int, model: ModelConfig, *,
                learning_rate: float | None = None) -> TrainerConfig:
        """The trainer's config for a schedule of `total_steps` optimizer steps."""
        return TrainerConfig(lr=learning_rate or self.learning_rate, betas=self.adam_betas,
                             weight_decay=self.l2, lr_warmup_ratio=self.lr_warmup_ratio,
                             min_lr_ratio=self.min_lr_ratio, total_steps=max(total_steps, 1),
                             train_batch_size=self.train_batch_size,
                             micro_train_batch_size=self.micro_train_batch_size,
                             max_norm=self.max_norm, dtype=model.dtype,
                             gradient_checkpointing=model.gradient_checkpointing)


@dataclass(frozen=True, kw_only=True)
class RLOptimConfig(OptimConfig):
    """The policy's optimiser (`learning_rate`) plus the critic's learning rate (PPO)."""

    learning_rate: float = 1e-6
    critic_learning_rate: float = 9e-6
    train_batch_size: int = 32
    micro_train_batch_size: int = 4
    min_lr_ratio: float = 0.1
