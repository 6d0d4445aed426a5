"""The configs of the offline training flows (SFT, RM, DPO, KTO, distillation, PRM, CSFT).

One frozen tree per flow, built from the step configs in `alignflow.tasks.offline.config`;
OpenRLHF's flags (`--pretrain`, `--dataset`, `--beta`, `--ipo`, `--save_steps`, ...) map
onto the dotted keys below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from alignflow.artifacts.errors import ConfigError
from alignflow.tasks.offline.config import (
    Kind,
    LossConfig,
    OfflineDataConfig,
    OfflineModelConfig,
    OfflineOptimConfig,
    TrainSpec,
)

OFFLINE_FLAGS = {
    "pretrain": "model.pretrain", "ref_pretrain": "model.ref_pretrain",
    "teacher_model": "model.teacher_model", "gradient_checkpointing": "model.gradient_checkpointing",
    "dataset": "data.dataset", "dataset_probs": "data.dataset_probs", "split": "data.split",
    "eval_dataset": "data.eval_dataset", "eval_split": "data.eval_split",
    "max_samples": "data.max_samples", "input_key": "data.input_key",
    "output_key": "data.output_key", "prompt_key": "data.prompt_key",
    "chosen_key": "data.chosen_key", "rejected_key": "data.rejected_key",
    "label_key": "data.label_key", "apply_chat_template": "data.apply_chat_template",
    "input_template": "data.input_template", "pretrain_mode": "data.pretrain_mode",
    "max_len": "data.max_len", "placeholder_token": "data.placeholder_token",
    "reward_tokens": "data.reward_tokens",
    "learning_rate": "optim.learning_rate", "train_batch_size": "optim.train_batch_size",
    "micro_train_batch_size": "optim.micro_train_batch_size", "max_epochs": "optim.max_epochs",
    "lr_warmup_ratio": "optim.lr_warmup_ratio", "max_norm": "optim.max_norm", "l2": "optim.l2",
    "adam_betas": "optim.adam_betas", "packing_samples": "optim.packing_samples",
    "beta": "loss.beta", "ipo": "loss.ipo", "label_smoothing": "loss.label_smoothing",
    "desirable_loss_weight": "loss.desirable_weight",
    "undesirable_loss_weight": "loss.undesirable_weight", "loss": "loss.rm_loss",
    "margin": "loss.margin", "save_steps": "save_steps", "eval_steps": "eval_steps",
    "max_steps": "max_steps",
}


@dataclass(frozen=True, kw_only=True)
class OfflineConfig:
    """One offline training run; `KIND` picks the objective."""

    KIND: ClassVar[Kind] = "sft"
    OPENRLHF_FLAGS: ClassVar[dict[str, str]] = OFFLINE_FLAGS

    model: OfflineModelConfig = field(default_factory=OfflineModelConfig)
    data: OfflineDataConfig = field(default_factory=OfflineDataConfig)
    optim: OfflineOptimConfig = field(default_factory=OfflineOptimConfig)
    loss: LossConfig = field(default_factory=LossConfig)
    save_steps: int = field(default=-1, metadata={
        "help": "optimizer steps per train task (checkpoint); -1: one task for the run"})
    eval_steps: int = field(default=-1, metadata={"help": "eval every N steps (-1: at the end)"})
    max_steps: int | None = field(default=None, metadata={"help": "cap on optimizer steps"})
    num_threads: int | None = field(default=None, metadata={"help": "torch threads per host"})
    keep_checkpoints: int = 2

    def __post_init__(self) -> None:
        if self.save_steps == 0 or self.save_steps < -1:
            raise ConfigError(f"save_steps={self.save_steps}: expected >= 1 or -1")
        if self.max_steps is not None and self.max_steps < 1:
            raise ConfigError(f"max_steps={self.max_steps}: expected >= 1 or null")

    @property
    def kind(self) -> Kind:
        return self.KIND

    def total_steps(self, train_rows: int) -> tuple[int, int]:
        """(steps per epoch, total optimizer steps); the last partial batch is dropped."""
        per_epoch = train_rows // self.optim.train_batch_size
        if per_epoch < 1:
            raise ConfigError(f"optim.train_batch_size={self.optim.train_batch_size}: larger "
                              f"than the {train_rows} training examples")
        total = per_epoch * self.optim.max_epochs
        return per_epoch, min(total, self.max_steps) if self.max_steps else total

    def chunk_size(self, total: int) -> int:
        return total if self.save_steps < 0 else min(self.save_steps, total)

    def train_spec(self) -> TrainSpec:
        return TrainSpec(kind=self.KIND, loss=self.loss,
                         train_batch_size=self.optim.train_batch_size,
                         micro_train_batch_size=self.optim.micro_train_batch_size,
                         save_steps=self.save_steps, eval_steps=self.eval_steps,
                         placeholder_token=self.data.placeholder_token,
                         reward_tokens=self.data.reward_tokens,
                         packing=self.optim.packing_samples and self.KIND in ("sft", "csft"))

    def chunks(self, total: int) -> int:
        return math.ceil(total / self.chunk_size(total))


def _data(**kw):
    return lambda: OfflineDataConfig(**kw)


def _optim(**kw):
    return lambda: OfflineOptimConfig(**kw)


@dataclass(frozen=True, kw_only=True)
class SFTConfig(OfflineConfig):
    """Supervised fine-tuning (loss on assistant turns; `pretrain_mode`: on every token)."""

    KIND: ClassVar[Kind] = "sft"
    data: OfflineDataConfig = field(default_factory=_data(dataset="alignflow:gsm8k-sft"))
    optim: OfflineOptimConfig = field(default_factory=_optim(learning_rate=5e-6))


@dataclass(frozen=True, kw_only=True)
class CSFTConfig(SFTConfig):
    """Conditional SFT: the prompt carries the row's score (`data.score_template`)."""

    KIND: ClassVar[Kind] = "csft"


@dataclass(frozen=True, kw_only=True)
class DistillConfig(SFTConfig):
    """Knowledge distillation: α·CE + (1−α)·KL(teacher‖student); `model.teacher_model`."""

    KIND: ClassVar[Kind] = "distill"

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.model.teacher_model:
            raise ConfigError("model.teacher_model: distillation needs a teacher "
                              "(--teacher_model NAME_OR_PATH)")


@dataclass(frozen=True, kw_only=True)
class PRMConfig(OfflineConfig):
    """Process reward model: CE on the reward tokens at step placeholders."""

    KIND: ClassVar[Kind] = "prm"
    data: OfflineDataConfig = field(default_factory=_data(
        dataset="", apply_chat_template=False, label_key="value", reward_tokens=("+", "-")))
    optim: OfflineOptimConfig = field(default_factory=_optim(learning_rate=1e-6))


@dataclass(frozen=True, kw_only=True)
class RMConfig(OfflineConfig):
    """Reward model: pairwise loss on the value head's last-token score."""

    KIND: ClassVar[Kind] = "rm"
    optim: OfflineOptimConfig = field(default_factory=_optim(learning_rate=9e-6))


@dataclass(frozen=True, kw_only=True)
class DPOConfig(OfflineConfig):
    """DPO (β = 0.1), IPO (`--ipo`) or cDPO (`--label_smoothing`) against a cached reference."""

    KIND: ClassVar[Kind] = "dpo"


@dataclass(frozen=True, kw_only=True)
class KTOConfig(OfflineConfig):
    """KTO on chosen (desirable) / rejected (undesirable) responses."""

    KIND: ClassVar[Kind] = "kto"
