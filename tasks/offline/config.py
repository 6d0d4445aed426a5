"""The step configs of the offline training flows (OpenRLHF's names where they exist).

Frozen dataclasses composed by `alignflow.flows.offline_config` into one config per flow.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

from alignflow.artifacts.errors import ConfigError
from alignflow.tasks.losses.preference import DPOVariant
from alignflow.tasks.losses.reward_model import RewardLossName
from alignflow.tasks.modeling.model_config import ModelConfig
from alignflow.tasks.trainers.base import TrainerConfig

Kind = Literal["sft", "rm", "dpo", "kto", "distill", "prm", "csft"]
PAIR_KINDS: tuple[Kind, ...] = ("rm", "dpo", "kto")


@dataclass(frozen=True, kw_only=True)
class OfflineModelConfig(ModelConfig):
    """The shared model section plus the distillation teacher."""

    teacher_model: str | None = field(default=None, metadata={"help": "distillation teacher"})


@dataclass(frozen=True, kw_only=True)
class OfflineDataConfig:
    """Where examples come from and how they become token ids."""

    dataset: str = field(default="alignflow:champ-pairs", metadata={
        "help": "dataset spec(s), comma-separated (HF name, local file/folder, alignflow:NAME)"})
    dataset_probs: str | None = field(default=None, metadata={"help": "mixing probabilities"})
    split: str | None = None
    eval_dataset: str | None = field(default=None, metadata={
        "help": "eval spec; default: hold out eval_ratio of the data"})
    eval_split: str | None = None
    eval_ratio: float = field(default=0.0, metadata={"help": "share held out for eval"})
    max_samples: int | None = None
    input_key: str = "input"
    output_key: str | None = "output"
    prompt_key: str | None = "prompt"
    chosen_key: str = "chosen"
    rejected_key: str = "rejected"
    label_key: str | None = field(default=None, metadata={"help": "PRM: per-step labels"})
    score_key: str = field(default="score", metadata={"help": "CSFT: attribute score column"})
    score_template: str = field(default="<rm_score>: {score}", metadata={
        "help": "CSFT: line appended to the prompt; {score} is the row's score"})
    apply_chat_template: bool = True
    input_template: str | None = None
    pretrain_mode: bool = field(default=False, metadata={"help": "SFT: loss on every token"})
    max_len: int = field(default=512, metadata={"help": "tokens per sample; longer is truncated"})
    placeholder_token: str = field(default="ки", metadata={"help": "PRM step placeholder"})
    reward_tokens: tuple[str, ...] | None = field(default=None, metadata={
        "help": "PRM label tokens, e.g. +,-"})
    seed: int = field(default=42, metadata={"help": "seed of the mix and the eval hold-out"})

    def __post_init__(self) -> None:
        if not 0.0 <= self.eval_ratio < 1.0:
            raise ConfigError(f"data.eval_ratio={self.eval_ratio}: expected a float in [0, 1)")
        if self.max_len < 2:
            raise ConfigError(f"data.max_len={self.max_len}: expected >= 2")
        if self.max_samples is not None and self.max_samples < 1:
            raise ConfigError(f"data.max_samples={self.max_samples}: expected >= 1 or null")
        if self.reward_tokens is not None:
            object.__setattr__(self, "reward_tokens", tuple(self.reward_tokens))


@dataclass(frozen=True, kw_only=True)
class OfflineOptimConfig:
    """Optimiser and batching (one optimizer step per `train_batch_size` examples)."""

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
        "help": "SFT-like objectives: pack each micro-batch into one row (no padding)"})

    def __post_init__(self) -> None:
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))
        if self.max_epochs < 1:
            raise ConfigError(f"optim.max_epochs={self.max_epochs}: expected >= 1")
        if self.train_batch_size % self.micro_train_batch_size:
            raise ConfigError(f"optim.train_batch_size={self.train_batch_size}: expected a "
                              f"multiple of micro_train_batch_size={self.micro_train_batch_size}")

    def trainer(self, total_steps: int, model: OfflineModelConfig) -> TrainerConfig:
        return TrainerConfig(lr=self.learning_rate, betas=self.adam_betas, weight_decay=self.l2,
                             lr_warmup_ratio=self.lr_warmup_ratio, min_lr_ratio=self.min_lr_ratio,
                             total_steps=max(total_steps, 1),
                             train_batch_size=self.train_batch_size,
                             micro_train_batch_size=self.micro_train_batch_size,
                             max_norm=self.max_norm, dtype=model.dtype,
                             gradient_checkpointing=model.gradient_checkpointing)


@dataclass(frozen=True, kw_only=True)
class LossConfig:
    """The objective's knobs; each flow uses the ones of its kind."""

    beta: float = 0.1
    loss_type: DPOVariant = field(default="sigmoid", metadata={"help": "sigmoid | ipo | cdpo"})
    ipo: bool = field(default=False, metadata={"help": "OpenRLHF's --ipo: loss_type=ipo"})
    label_smoothing: float = 0.0
    desirable_weight: float = 1.0
    undesirable_weight: float = 1.0
    rm_loss: RewardLossName = field(default="sigmoid", metadata={"help": "sigmoid | logexp"})
    margin: float | None = field(default=None, metadata={"help": "RM: constant margin"})
    kd_alpha: float = field(default=0.5, metadata={"help": "KD: weight of the CE term"})

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ConfigError(f"loss.beta={self.beta}: expected > 0")
        if not 0.0 <= self.label_smoothing < 0.5:
            raise ConfigError(f"loss.label_smoothing={self.label_smoothing}: expected [0, 0.5)")
        if not 0.0 <= self.kd_alpha <= 1.0:
            raise ConfigError(f"loss.kd_alpha={self.kd_alpha}: expected a float in [0, 1]")

    @property
    def dpo_variant(self) -> DPOVariant:
        """cDPO when label smoothing is set on the sigmoid loss (OpenRLHF's convention)."""
        if self.ipo:
            return "ipo"
        if self.loss_type == "sigmoid" and self.label_smoothing > 0:
            return "cdpo"
        return self.loss_type


@dataclass(frozen=True, kw_only=True)
class TrainSpec:
    """What a `train` task needs besides the data: objective, batching, cadence."""

    kind: Kind
    loss: LossConfig
    train_batch_size: int
    micro_train_batch_size: int
    save_steps: int
    eval_steps: int
    placeholder_token: str = "ки"
    reward_tokens: tuple[str, ...] | None = None
    packing: bool = False


@dataclass(frozen=True)
class Plan:
    """The run's step schedule, fixed once (journalled) so a resume walks the same steps."""

    order_seed: int
    train_rows: int
    steps_per_epoch: int
    total_steps: int
    save_steps: int

    @property
    def chunks(self) -> int:
        return math.ceil(self.total_steps / self.save_steps)

    def chunk_steps(self, chunk: int) -> range:
        return range(chunk * self.save_steps, min((chunk + 1) * self.save_steps, self.total_steps))
