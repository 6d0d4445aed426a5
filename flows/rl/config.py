"""The config of the PPO-family flows, composed from the steps' own configs.

OpenRLHF users can keep their flags: `--advantage_estimator group_norm`,
`--n_samples_per_prompt 4`, `--init_kl_coef 0.01`, ... map onto the dotted keys below
(`flows/aliases.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from alignflow.errors import ConfigError
from alignflow.flows.aliases import ALIASES
from alignflow.tasks.modeling.model_config import RLModelConfig
from alignflow.tasks.rewards.registry import RewardConfig
from alignflow.tasks.rl.learn_config import AlgoConfig, LearnSettings
from alignflow.tasks.steps.generate import GenerateConfig
from alignflow.tasks.steps.placement import PlacementConfig
from alignflow.tasks.steps.prompts import DataConfig
from alignflow.tasks.trainers.optim import RLOptimConfig


def _default_rewards() -> RewardConfig:
    return RewardConfig(sources=("rule:gsm8k",))


@dataclass(frozen=True, kw_only=True)
class RLConfig:
    """One PPO-family run: models, placement, data, sampling, rewards, algorithm, optimiser."""

    ALIASES: ClassVar[dict[str, str]] = ALIASES

    model: RLModelConfig = field(default_factory=RLModelConfig)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    data: DataConfig = field(default_factory=DataConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    rewards: RewardConfig = field(default_factory=_default_rewards)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    optim: RLOptimConfig = field(default_factory=RLOptimConfig)
    num_episodes: int = 1
    max_iterations: int | None = field(default=None, metadata={"help": "cap on iterations"})
    save_steps: int = field(default=-1, metadata={
        "help": "export an HF-format policy every N iterations (-1: only at the end)"})
    num_threads: int | None = field(default=None, metadata={"help": "torch threads per host"})
    keep_checkpoints: int = field(default=2, metadata={
        "help": "resume checkpoints kept per trained role (older ones are deleted; >= 2)"})

    def __post_init__(self) -> None:
        if self.num_episodes < 1:
            raise ConfigError(f"num_episodes={self.num_episodes}: expected >= 1")
        if self.max_iterations is not None and self.max_iterations < 1:
            raise ConfigError(f"max_iterations={self.max_iterations}: expected >= 1 or null")
        if self.algo.advantage_estimator in ("group_norm", "rloo") and \
                self.generate.n_samples_per_prompt < 2:
            raise ConfigError(f"algo.advantage_estimator={self.algo.advantage_estimator!r} needs "
                              f"generate.n_samples_per_prompt >= 2 (got "
                              f"{self.generate.n_samples_per_prompt})")

    def iterations(self, num_prompts: int) -> int:
        """Iterations over `num_episodes` passes through the prompts, capped by max_iterations."""
        per_episode = math.ceil(num_prompts / self.generate.rollout_batch_size)
        total = per_episode * self.num_episodes
        return min(total, self.max_iterations) if self.max_iterations else total

    def optimizer_steps(self, iterations: int) -> int:
        """Optimizer steps of the whole run (the LR schedule's length)."""
        per_iter = math.ceil(self.generate.samples_per_iteration / self.optim.train_batch_size)
        return iterations * per_iter * self.optim.max_epochs

    @property
    def learn(self) -> LearnSettings:
        """What the learn steps take from this config."""
        return LearnSettings(algo=self.algo, optim=self.optim,
                             n_samples=self.generate.n_samples_per_prompt,
                             temperature=self.generate.temperature,
                             max_len=self.generate.generate_max_len)


def _estimator(name: str):
    def factory() -> AlgoConfig:
        return AlgoConfig(advantage_estimator=name)
    return factory


@dataclass(frozen=True, kw_only=True)
class PPOConfig(RLConfig):
    """PPO with a critic (GAE)."""

    algo: AlgoConfig = field(default_factory=_estimator("gae"))


@dataclass(frozen=True, kw_only=True)
class RLOOConfig(RLConfig):
    algo: AlgoConfig = field(default_factory=_estimator("rloo"))


@dataclass(frozen=True, kw_only=True)
class ReinforceConfig(RLConfig):
    algo: AlgoConfig = field(default_factory=_estimator("reinforce"))


@dataclass(frozen=True, kw_only=True)
class ReinforceBaselineConfig(RLConfig):
    algo: AlgoConfig = field(default_factory=_estimator("reinforce_baseline"))


@dataclass(frozen=True, kw_only=True)
class DrGRPOConfig(RLConfig):
    algo: AlgoConfig = field(default_factory=_estimator("dr_grpo"))
