"""The config of the PPO-family flows, composed from the steps' own configs.

OpenRLHF users can keep their flags: `--advantage_estimator group_norm`,
`--n_samples_per_prompt 4`, `--init_kl_coef 0.01`, ... map onto the dotted keys below.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from alignflow.artifacts.errors import ConfigError
from alignflow.tasks.rewards.registry import RewardConfig
from alignflow.tasks.rl.generate import GenerateConfig
from alignflow.tasks.rl.learn_config import AlgoConfig, OptimConfig
from alignflow.tasks.rl.models import PlacementConfig, RLModelConfig
from alignflow.tasks.rl.prompts import DataConfig

OPENRLHF_FLAGS = {
    "pretrain": "model.pretrain", "ref_pretrain": "model.ref_pretrain",
    "critic_pretrain": "model.critic_pretrain",
    "gradient_checkpointing": "model.gradient_checkpointing",
    "colocate_all_models": "placement.colocate_all_models",
    "colocate_actor_ref": "placement.colocate_actor_ref",
    "colocate_critic_reward": "placement.colocate_critic_reward",
    "prompt_data": "data.prompt_data", "prompt_data_probs": "data.prompt_data_probs",
    "prompt_split": "data.prompt_split", "input_key": "data.input_key",
    "label_key": "data.label_key", "apply_chat_template": "data.apply_chat_template",
    "input_template": "data.input_template", "max_samples": "data.max_samples",
    "prompt_max_len": "data.prompt_max_len",
    "rollout_batch_size": "generate.rollout_batch_size",
    "n_samples_per_prompt": "generate.n_samples_per_prompt",
    "generate_max_len": "generate.generate_max_len", "temperature": "generate.temperature",
    "top_p": "generate.top_p", "top_k": "generate.top_k",
    "micro_rollout_batch_size": "generate.micro_rollout_batch_size",
    "remote_rm_url": "rewards.sources", "reward_pretrain": "rewards.sources",
    "reward_weights": "rewards.weights",
    "advantage_estimator": "algo.advantage_estimator", "gamma": "algo.gamma",
    "lambd": "algo.lambd", "eps_clip": "algo.eps_clip", "eps_clip_high": "algo.eps_clip_high",
    "dual_clip": "algo.dual_clip", "value_clip": "algo.value_clip",
    "reward_clip_range": "algo.reward_clip_range", "normalize_reward": "algo.normalize_reward",
    "no_advantage_std_norm": "algo.no_advantage_std_norm",
    "dynamic_filtering": "algo.dynamic_filtering",
    "freeze_actor_steps": "algo.freeze_actor_steps",
    "overlong_buffer_len": "algo.overlong_buffer_len",
    "overlong_penalty_factor": "algo.overlong_penalty_factor", "max_epochs": "algo.max_epochs",
    "entropy_loss_coef": "algo.entropy_coef", "ptx_coef": "algo.ptx.ptx_coef",
    "pretrain_data": "algo.ptx.pretrain_data", "init_kl_coef": "algo.kl.init_kl_coef",
    "kl_target": "algo.kl.kl_target", "kl_horizon": "algo.kl.kl_horizon",
    "kl_estimator": "algo.kl.kl_estimator", "use_kl_loss": "algo.kl.use_kl_loss",
    "actor_learning_rate": "optim.actor_learning_rate",
    "critic_learning_rate": "optim.critic_learning_rate",
    "train_batch_size": "optim.train_batch_size",
    "micro_train_batch_size": "optim.micro_train_batch_size",
    "lr_warmup_ratio": "optim.lr_warmup_ratio", "max_norm": "optim.max_norm", "l2": "optim.l2",
    "adam_betas": "optim.adam_betas", "packing_samples": "optim.packing_samples",
    "num_episodes": "num_episodes", "max_iterations": "max_iterations",
    "save_steps": "save_steps",
}


def _default_rewards() -> RewardConfig:
    return RewardConfig(sources=("rule:gsm8k",))


@dataclass(frozen=True, kw_only=True)
class RLConfig:
    """One PPO-family run: models, placement, data, sampling, rewards, algorithm, optimiser."""

    OPENRLHF_FLAGS: ClassVar[dict[str, str]] = OPENRLHF_FLAGS

    model: RLModelConfig = field(default_factory=RLModelConfig)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    data: DataConfig = field(default_factory=DataConfig)
    generate: GenerateConfig = field(default_factory=GenerateConfig)
    rewards: RewardConfig = field(default_factory=_default_rewards)
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
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
        return iterations * per_iter * self.algo.max_epochs


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
