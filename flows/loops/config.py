"""Configs of the durable loops: rejection sampling and iterative DPO.

Both reuse the RL flows' sections (model, data, generate, rewards) and the optimiser
section every flow shares (`optim`), and add the round count; iterative DPO adds the DPO
loss section of the `dpo` flow and the pair margin.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar

from alignflow.errors import ConfigError
from alignflow.flows.aliases import ALIASES
from alignflow.tasks.modeling.model_config import ModelConfig
from alignflow.tasks.offline.config import TrainSpec
from alignflow.tasks.offline.loss_config import DPOLossConfig
from alignflow.tasks.rewards.registry import RewardConfig
from alignflow.tasks.steps.generate import GenerateConfig
from alignflow.tasks.steps.prompts import DataConfig
from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.optim import OptimConfig


def _default_rewards() -> RewardConfig:
    return RewardConfig(sources=("rule:gsm8k",))


def _default_optim() -> OptimConfig:
    return OptimConfig(learning_rate=1e-6, micro_train_batch_size=4, lr_warmup_ratio=0.0,
                       min_lr_ratio=1.0)


@dataclass(frozen=True, kw_only=True)
class LoopConfig:
    """R rounds of: generate n per prompt with the current policy, score, select, fine-tune."""

    ALIASES: ClassVar[dict[str, str]] = ALIASES
    KIND: ClassVar[str] = "sft"

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    rewards: RewardConfig = field(default_factory=_default_rewards)
    optim: OptimConfig = field(default_factory=_default_optim)
    save_steps: int = field(default=-1, metadata={
        "help": "optimizer steps per training task (a resume point); -1: one task per round"})
    rounds: int = field(default=2, metadata={"help": "rounds of generate → select → train"})
    final_eval: bool = field(default=True, metadata={
        "help": "generate and score once more with the final policy (round R), for progress"})
    num_threads: int | None = field(default=None, metadata={"help": "torch threads of the host"})
    keep_checkpoints: int = 2
    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ConfigError(f"rounds={self.rounds}: expected >= 1")
        if self.save_steps == 0 or self.save_steps < -1:
            raise ConfigError(f"save_steps={self.save_steps}: expected >= 1, or -1 for one "
                              "task per round")

    @property
    def steps_per_round(self) -> int:
        """Upper bound on a round's optimizer steps (every prompt kept): the LR schedule's unit."""
        per_epoch = -(-self.generate.rollout_batch_size // self.optim.train_batch_size)
        return per_epoch * self.optim.max_epochs

    def trainer(self) -> TrainerConfig:
        return self.optim.trainer(self.rounds * self.steps_per_round, self.model)

    def train_spec(self) -> TrainSpec:
        return TrainSpec(kind=self.KIND, loss=getattr(self, "loss", None),
                         train_batch_size=self.optim.train_batch_size,
                         micro_train_batch_size=self.optim.micro_train_batch_size,
                         save_steps=self.save_steps, eval_steps=-1)


@dataclass(frozen=True, kw_only=True)
class RejectionSamplingConfig(LoopConfig):
    """Best-of-n fine-tuning: keep each prompt's best sample (if >= `threshold`), SFT on them."""

    threshold: float | None = field(default=None, metadata={
        "help": "minimum reward a best sample needs to be kept (null: keep every best)"})


@dataclass(frozen=True, kw_only=True)
class IterativeDPOConfig(LoopConfig):
    """Best-vs-worst pairs per prompt (gap >= `margin`), DPO against the round's start policy."""

    KIND: ClassVar[str] = "dpo"

    margin: float = field(default=0.0, metadata={
        "help": "minimum reward gap best - worst for a pair (pairs with no gap are always skipped)"})
    loss: DPOLossConfig = field(default_factory=DPOLossConfig)
    reference_micro_batch: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.margin < 0:
            raise ConfigError(f"margin={self.margin}: expected >= 0")
