"""Configs of the durable loops: rejection sampling and iterative DPO.

Both reuse the RL flows' sections (model, data, generate, rewards) and add the round count
and the in-round fine-tuning (`train`); iterative DPO adds the DPO loss and pair margin.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.artifacts.errors import ConfigError
from alignflow.tasks.loops.plan import LoopTrainConfig
from alignflow.tasks.loops.train_dpo import DPOLossConfig
from alignflow.tasks.modeling.model_config import ModelConfig
from alignflow.tasks.rewards.registry import RewardConfig
from alignflow.tasks.rl.generate import GenerateConfig
from alignflow.tasks.rl.prompts import DataConfig
from alignflow.tasks.trainers.base import TrainerConfig


def _default_rewards() -> RewardConfig:
    return RewardConfig(sources=("rule:gsm8k",))


@dataclass(frozen=True, kw_only=True)
class LoopConfig:
    """R rounds of: generate n per prompt with the current policy, score, select, fine-tune."""

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    rewards: RewardConfig = field(default_factory=_default_rewards)
    train: LoopTrainConfig = field(default_factory=LoopTrainConfig)
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

    @property
    def steps_per_round(self) -> int:
        """Upper bound on a round's optimizer steps (every prompt kept): the LR schedule's unit."""
        return self.train.steps(self.generate.rollout_batch_size)

    def trainer(self) -> TrainerConfig:
        return self.train.trainer(self.rounds * self.steps_per_round, dtype=self.model.dtype,
                                  gradient_checkpointing=self.model.gradient_checkpointing)


@dataclass(frozen=True, kw_only=True)
class RejectionSamplingConfig(LoopConfig):
    """Best-of-n fine-tuning: keep each prompt's best sample (if >= `threshold`), SFT on them."""

    threshold: float | None = field(default=None, metadata={
        "help": "minimum reward a best sample needs to be kept (null: keep every best)"})


@dataclass(frozen=True, kw_only=True)
class IterativeDPOConfig(LoopConfig):
    """Best-vs-worst pairs per prompt (gap >= `margin`), DPO against the round's start policy."""

    margin: float = field(default=0.0, metadata={
        "help": "minimum reward gap best - worst for a pair (pairs with no gap are always skipped)"})
    dpo: DPOLossConfig = field(default_factory=DPOLossConfig)
    reference_micro_batch: int = 8

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.margin < 0:
            raise ConfigError(f"margin={self.margin}: expected >= 0")
