"""Algorithm settings of the RL learn step (OpenRLHF's flag names), and the one record a
learn step takes: `LearnSettings` (algorithm, optimiser, sampling facts it needs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import get_args

from alignflow.errors import ConfigError
from alignflow.tasks.advantages.estimators import Estimator
from alignflow.tasks.losses.aggregate import Aggregation
from alignflow.tasks.losses.kl import KLEstimator
from alignflow.tasks.rl.ptx import PtxConfig
from alignflow.tasks.trainers.optim import RLOptimConfig


@dataclass(frozen=True, kw_only=True)
class KLConfig:
    """KL to the reference: in the per-token reward (init_kl_coef) or as a loss term."""

    init_kl_coef: float = 0.0
    kl_target: float | None = field(default=None, metadata={"help": "adaptive β when set"})
    kl_horizon: int = 10000
    kl_estimator: KLEstimator = "k1"
    use_kl_loss: bool = False

    def __post_init__(self) -> None:
        if self.init_kl_coef < 0:
            raise ConfigError(f"algo.kl.init_kl_coef={self.init_kl_coef}: expected >= 0")
        if self.kl_estimator not in get_args(KLEstimator):
            raise ConfigError(f"algo.kl.kl_estimator={self.kl_estimator!r}: expected one of "
                              f"{get_args(KLEstimator)}")

    @property
    def used(self) -> bool:
        """Whether any KL term needs reference log-probs (β > 0 now or adaptively later)."""
        return self.init_kl_coef > 0 or self.kl_target is not None


@dataclass(frozen=True, kw_only=True)
class AlgoConfig:
    """Advantage estimator, PPO clipping, reward shaping and the paper's tricks."""

    advantage_estimator: Estimator = "group_norm"
    gamma: float = 1.0
    lambd: float = 0.95
    eps_clip: float = 0.2
    eps_clip_high: float | None = None
    dual_clip: float | None = field(default=None, metadata={"help": "e.g. 3.0; off when null"})
    value_clip: float = 0.5
    reward_clip_range: float = 10.0
    normalize_reward: bool = False
    no_advantage_std_norm: bool = False
    dynamic_filtering: bool = False
    freeze_actor_steps: int = 0
    overlong_buffer_len: int | None = field(default=None, metadata={
        "help": "DAPO length penalty: responses in the last N tokens before "
                "generate_max_len lose up to overlong_penalty_factor of reward"})
    overlong_penalty_factor: float = 1.0
    entropy_coef: float = 0.0
    loss_agg: Aggregation = "token-mean"
    kl: KLConfig = field(default_factory=KLConfig)
    ptx: PtxConfig = field(default_factory=PtxConfig)

    def __post_init__(self) -> None:
        if self.advantage_estimator not in get_args(Estimator):
            raise ConfigError(f"algo.advantage_estimator={self.advantage_estimator!r}: expected "
                              f"one of {get_args(Estimator)}")
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ConfigError(f"algo.dual_clip={self.dual_clip}: expected > 1 or null")

    @property
    def needs_critic(self) -> bool:
        return self.advantage_estimator == "gae"


@dataclass(frozen=True, kw_only=True)
class LearnSettings:
    """Everything a learn step needs from the run's config, in one journal-able record:
    the algorithm, the optimiser, and the sampling facts the loss depends on."""

    algo: AlgoConfig
    optim: RLOptimConfig
    n_samples: int  # responses per prompt (groups are consecutive rows)
    temperature: float  # logits are scaled as when sampling
    max_len: int  # generation length (DAPO's overlong penalty, Dr.GRPO's constant)
