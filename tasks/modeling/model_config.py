"""The `model` section every training flow shares: what to train, its reference, precision.

RL flows add the critic (`RLModelConfig`), distillation adds the teacher
(`tasks/offline/config.py`); the durable loops use this section as is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import get_args

from alignflow.errors import ConfigError
from alignflow.tasks.modeling.loading import Dtype


@dataclass(frozen=True, kw_only=True)
class ModelConfig:
    """Models: HF names, local folders, or prepared offline names (`smollm2-135m`)."""

    pretrain: str = field(default="smollm2-135m", metadata={"help": "the model to train (policy)"})
    ref_pretrain: str | None = field(default=None, metadata={"help": "reference; default: pretrain"})
    dtype: Dtype = "fp32"
    gradient_checkpointing: bool = False

    def __post_init__(self) -> None:
        if self.dtype not in get_args(Dtype):
            raise ConfigError(f"model.dtype={self.dtype!r}: expected one of {get_args(Dtype)}")

    @property
    def reference(self) -> str:
        return self.ref_pretrain or self.pretrain


@dataclass(frozen=True, kw_only=True)
class RLModelConfig(ModelConfig):
    """The shared model section plus the critic (PPO)."""

    critic_pretrain: str | None = field(
        default=None, metadata={"help": "critic init (e.g. the reward model); default: pretrain"})

    @property
    def critic(self) -> str:
        return self.critic_pretrain or self.pretrain


@dataclass(frozen=True, kw_only=True)
class DistillModelConfig(ModelConfig):
    """The shared model section plus the distillation teacher."""

    teacher_model: str | None = field(default=None, metadata={"help": "distillation teacher"})
