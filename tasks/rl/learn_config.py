"""Algorithm and optimiser settings of the RL learn step (OpenRLHF's flag names)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, get_args

from alignflow.artifacts.errors import ConfigError
from alignflow.tasks.advantages.estimators import Estimator
from alignflow.tasks.losses.aggregate import Aggregation
from alignflow.tasks.rl.ptx import PtxConfig
from alignflow.tasks.trainers.base import TrainerConfig

KLEstimator = Literal["k1", "k2", "k3"]


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
    max_epochs: int = 1
    entropy_coef: float = 0.0
    loss_agg: Aggregation = "token-mean"
    kl: KLConfig = field(default_factory=KLConfig)
    ptx: PtxConfig = field(default_factory=PtxConfig)

    def __post_init__(self) -> None:
        if self.advantage_estimator not in get_args(Estimator):
            raise ConfigError(f"algo.advantage_estimator={self.advantage_estimator!r}: expected "
                              f"one of {get_args(Estimator)}")
        if self.max_epochs < 1:
            raise ConfigError(f"algo.max_epochs={self.max_epochs}: expected >= 1")
        if self.dual_clip is not None and self.dual_clip <= 1.0:
            raise ConfigError(f"algo.dual_clip={self.dual_clip}: expected > 1 or null")

    @property
    def needs_critic(self) -> bool:
        return self.advantage_estimator == "gae"


@dataclass(frozen=True, kw_only=True)
class OptimConfig:
    """Optimisers of actor and critic, and how a rollout batch splits into steps."""

    actor_learning_rate: float = 1e-6
    critic_learning_rate: float = 9e-6
    train_batch_size: int = 32
    micro_train_batch_size: int = 4
    lr_warmup_ratio: float = 0.03
    max_norm: float = 1.0
    l2: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.95)
    packing_samples: bool = field(default=False, metadata={
        "help": "pack micro-batches into one row (no padding); pays off with varlen attention "
                "kernels (GPU), not on CPU where the block mask costs full attention"})

    def __post_init__(self) -> None:
        if self.train_batch_size % self.micro_train_batch_size:
            raise ConfigError(f"optim.train_batch_size={self.train_batch_size}: expected a "
                              f"multiple of micro_train_batch_size={self.micro_train_batch_size}")
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))

    def trainer(self, lr: float, total_steps: int, *, dtype: str = "fp32",
                gradient_checkpointing: bool = False) -> TrainerConfig:
        return TrainerConfig(lr=lr, betas=self.adam_betas, weight_decay=self.l2,
                             lr_warmup_ratio=self.lr_warmup_ratio, total_steps=max(total_steps, 1),
                             train_batch_size=self.train_batch_size,
                             micro_train_batch_size=self.micro_train_batch_size,
                             max_norm=self.max_norm, dtype=dtype,
                             gradient_checkpointing=gradient_checkpointing)
