"""The config of the PPO-family flows, composed from the steps' own configs, under
OpenRLHF 0.11's names (`actor.*`, `critic.*`, `ref.*`, `reward.*`, `rollout.*`, `train.*`,
`algo.*`, `data.*`, `ckpt.*`, `ds.*`), with alignflow-only keys beside them.

OpenRLHF 0.9's flags (`--advantage_estimator group_norm`, `--n_samples_per_prompt 4`,
`--init_kl_coef 0.01`, ...) map onto these keys (`flows/compat/aliases.py`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar

from alignflow.errors import ConfigError, require
from alignflow.flows.compat import aliases
from alignflow.flows.config.lookup import value_at
from alignflow.flows.rl import async_config, checks
from alignflow.flows.rl.async_config import AsyncConfig, AsyncTrainKeys
from alignflow.flows.tracking.config import LoggerConfig
from alignflow.tasks.advantages.names import Estimator
from alignflow.tasks.agents.config import AgentConfig
from alignflow.tasks.data.source import DataConfig
from alignflow.tasks.engines.vllm.config import VLLMSection
from alignflow.tasks.plan.build import HostAsk, RunAsk, build
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.placement import Colocation, PlacementConfig, Role, host_workers
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.rl.eval_config import RLCkptConfig, RLEvalConfig
from alignflow.tasks.rl.learn_config import (
    AlgoConfig,
    EstimatorConfig,
    LearnSettings,
    RLRewardConfig,
    pi_old_notes,
)
from alignflow.tasks.rl.roles import ActorConfig, CriticConfig, RLRefConfig
from alignflow.tasks.steps.rollout_config import RolloutConfig, check_lengths
from alignflow.tasks.trainers.deepspeed.section import DSConfig
from alignflow.tasks.trainers.optim import TrainConfig


@dataclass(frozen=True, kw_only=True)
class RLTrainConfig(TrainConfig, Colocation, AsyncTrainKeys):
    """Batching, run length and colocation (`train.*`).

    num_episodes: passes over the prompt data
    max_iterations: cap on iterations (alignflow; null: no cap)
    enable_ema: keep a moving average of the policy's weights, updated after every optimizer step, and export it instead of the trained weights (checkpointed: a resumed run continues it)
    ema_beta: β of that average: θ_ema ← (1 − β)·θ + β·θ_ema
    dynamic_batch_enable: micro-batches by token budget instead of by count: as many samples as fit max_tokens_per_gpu (training) and rollout.max_tokens_per_gpu (reference, values, log-prob passes)
    max_tokens_per_gpu: prompt + response tokens of one training micro-batch with dynamic_batch_enable (a longer sample goes alone)
    """

    batch_size: int = 128
    micro_batch_size: int = 1
    num_episodes: int = 1
    max_iterations: int | None = None
    dynamic_batch_enable: bool = False
    max_tokens_per_gpu: int = 16192
    enable_ema: bool = False
    ema_beta: float = 0.992

    def __post_init__(self) -> None:
        super().__post_init__()
        require(math.isfinite(self.ema_beta) and 0.0 <= self.ema_beta <= 1.0, "ema_beta",
                "a float in [0, 1]", self.ema_beta)
        require(self.num_episodes >= 1, "num_episodes", "an integer >= 1", self.num_episodes)
        require(self.max_tokens_per_gpu >= 1, "max_tokens_per_gpu", "an integer >= 1",
                self.max_tokens_per_gpu)
        if self.max_iterations is not None:
            require(self.max_iterations >= 1, "max_iterations", "an integer >= 1 or null",
                    self.max_iterations)


@dataclass(frozen=True, kw_only=True)
class RLConfig:
    """One PPO-family run: roles, data, sampling, rewards, algorithm, batching, checkpoints."""

    OPENRLHF: ClassVar[tuple[str, ...]] = aliases.RL_CLIS  # the CLIs whose flags it takes
    ALIASES: ClassVar[dict[str, aliases.Target]] = aliases.RL
    RESUME_FIXED: ClassVar[dict[str, str]] = {  # `flows/control/reconfigure.py`
        "data.": "prompts", "eval.split": "eval_prompts"}

    actor: ActorConfig = field(default_factory=ActorConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    ref: RLRefConfig = field(default_factory=RLRefConfig)
    reward: RLRewardConfig = field(default_factory=RLRewardConfig)
    data: DataConfig = field(default_factory=DataConfig)
    rollout: RolloutConfig = field(default_factory=lambda: RolloutConfig(n_samples_per_prompt=8))
    algo: AlgoConfig = field(default_factory=AlgoConfig)
    train: RLTrainConfig = field(default_factory=RLTrainConfig)
    eval: RLEvalConfig = field(default_factory=RLEvalConfig)
    ckpt: RLCkptConfig = field(default_factory=RLCkptConfig)
    ds: DSConfig = field(default_factory=DSConfig)
    vllm: VLLMSection = field(default_factory=VLLMSection)
    placement: PlacementConfig = field(default_factory=PlacementConfig)
    async_: AsyncConfig = field(default_factory=AsyncConfig)
    agent: AgentConfig = field(default_factory=AgentConfig)
    num_threads: int | None = field(default=None, metadata={"help": "torch threads per host"})
    logger: LoggerConfig = field(default_factory=LoggerConfig)

    def __post_init__(self) -> None:
        if self.num_threads is not None:
            require(self.num_threads >= 1, "num_threads", "an integer >= 1 or null",
                    self.num_threads)
        self._check_data_parallel()
        check_lengths(self.rollout, self.data.max_len)
        estimator = self.algo.advantage.estimator
        if estimator in ("group_norm", "rloo", "dr_grpo"):
            require(self.rollout.n_samples_per_prompt >= 2, "rollout.n_samples_per_prompt",
                    f">= 2 for algo.advantage.estimator={estimator!r} (it compares the "
                    "samples of a prompt)", self.rollout.n_samples_per_prompt)
        async_config.check(self.train, self.async_)
        checks.check(self)
        if self.uses_generator and self.rollout.max_new_tokens is None:
            raise ConfigError("rollout.max_new_tokens = null (each prompt's budget from "
                              "data.max_len) is for synchronous runs; asynchronous generation "
                              "and agent episodes need a number")

    TRAINED: ClassVar[tuple[str, ...]] = ("actor",)  # roles this flow trains

    @property
    def refills(self) -> bool:
        """Whether dynamic filtering refills (synchronous runs, as OpenRLHF: `refill.py`);
        a generator worker's batches are filtered without refills."""
        return self.algo.dynamic_filtering_enable and not self.uses_generator

    def _check_data_parallel(self) -> None:
        """Every rank of a trained role gets an equal share of each minibatch."""
        for role in self.TRAINED:
            n = getattr(self, role).workers
            for key, value in (("train.batch_size", self.train.batch_size),
                               ("rollout.batch_size × rollout.n_samples_per_prompt",
                                self.rollout.samples_per_iteration)):
                require(value % n == 0, key, f"a multiple of the {n} workers of {role} "
                        f"({role}.num_nodes × {role}.num_gpus_per_node)", value)

    def iterations(self, num_prompts: int) -> int:
        """Iterations over `num_episodes` passes through the prompts, capped by max_iterations."""
        per_episode = math.ceil(num_prompts / self.rollout.batch_size)
        total = per_episode * self.train.num_episodes
        cap = self.train.max_iterations
        return min(total, cap) if cap else total

    def optimizer_steps(self, iterations: int) -> int:
        """Optimizer steps of the whole run (the LR schedule's length)."""
        per_iter = math.ceil(self.rollout.samples_per_iteration / self.train.batch_size)
        return iterations * per_iter * self.train.max_epochs

    def roles(self, *, critic: bool = False) -> tuple[Role, ...]:
        """The models this run uses: a reference only when a KL term needs its log-probs
        (a KL penalty in the reward, a KL loss with β > 0, or an adaptive β)."""
        return ("actor", *(("ref",) if self.algo.kl.used else ()),
                *(("critic",) if critic else ()), "reward")

    @property
    def run_roles(self) -> tuple[Role, ...]:
        """The roles this run uses: a critic where the flow trains one and GAE reads it."""
        return self.roles(critic="critic" in self.TRAINED and self.algo.needs_critic)

    def run_plan(self, cluster: Cluster | None = None) -> RunPlan:
        """Which processes this run needs, where and on what (`tasks/plan/`), on `cluster`
        (default: the Ray cluster joined, else this machine)."""
        cluster = cluster or Cluster.current()
        return build(self._ask(on_gpu=cluster.gpus > 0), cluster)

    def _ask(self, *, on_gpu: bool = False) -> RunAsk:
        roles, ckpt = self.run_roles, self.actor.gradient_checkpointing_enable
        sections = {"actor": self.actor, "ref": self.ref, "critic": self.critic,
                    "reward": self.reward}
        trains = {r: (self.actor if r == "actor" else self.critic).trainer_config(
            1, self.train, self.ds, gradient_checkpointing=ckpt) for r in ("actor", "critic") if r in roles}
        hosts = tuple(HostAsk(
            name=name, roles=rs, workers=host_workers(rs, sections),
            trains=tuple((r, trains[r]) for r in rs if r in trains),
            generates="actor" in rs and not self.uses_generator,
            holds_model=rs != ("reward",) or self.reward.holds_model,
            note="" if "ref" in roles or "actor" not in rs else
            " (no reference model: no KL term uses it)")
            for name, rs in self.train.hosts(roles, on_gpu=on_gpu).items())
        return RunAsk(hosts=hosts, placement=self.placement, ds=self.ds,
                      engine=self.rollout.engine, vllm=self.vllm,
                      colocated=len(hosts) == 1, generator=self.uses_generator,
                      hybrid=self.train.colocate_all is True and self.staleness == 0,
                      memory=self._memory)

    def _memory(self) -> MemoryAsk:
        """What the plan's memory model reads of this config: its keys and each model's
        config.json (a folder, the Hub cache, a prepared name; a size not read is unknown:
        the plan records its peaks as unknown and refuses nothing on them)."""
        from alignflow.tasks.zoo.registry import model_config

        return MemoryAsk.of(lambda key: value_at(self, key), read=model_config,
                            kind=getattr(self, "KIND", ""))

    @property
    def staleness(self) -> int:
        """Policy versions generation runs ahead of learning (0: synchronous)."""
        return async_config.staleness(self.train, self.async_)

    @property
    def uses_generator(self) -> bool:
        """Whether generation runs on a worker of its own (async runs, agent episodes)."""
        chosen = self.async_.generator_worker
        default = self.staleness > 0 or self.train.agent_func_path is not None
        return default if chosen is None else chosen

    @property
    def checkpoints_kept(self) -> int:
        """Checkpoints kept per role: a generator may still need s + 1 versions back."""
        kept = self.ckpt.max_num
        return max(kept, self.staleness + 3) if self.uses_generator else kept

    @property
    def critic_start(self) -> str:
        """The critic's initial weights, as OpenRLHF picks them: critic.model_name_or_path,
        else the first reward model (`--reward_pretrain a,b` -> a) when rewards come from
        one and not from a remote server or function, else the actor's model."""
        if self.critic.model_name_or_path:
            return self.critic.model_name_or_path
        model = (self.reward.model_name_or_path or "").split(",")[0].strip()
        return model if model and not self.reward.remote_url else self.actor.model_name_or_path

    @property
    def rollout_max_tokens(self) -> int | None:
        """The token budget of an inference micro-batch (reference, values, log-probs) with
        dynamic batching: rollout.max_tokens_per_gpu, else train.max_tokens_per_gpu (as
        OpenRLHF fills it in); None: micro-batches of rollout.micro_batch_size samples."""
        if not self.train.dynamic_batch_enable:
            return None
        return self.rollout.max_tokens_per_gpu or self.train.max_tokens_per_gpu

    @property
    def learn(self) -> LearnSettings:
        """What the learn steps take from this config."""
        dynamic = self.train.dynamic_batch_enable
        return LearnSettings(algo=self.algo, actor=self.actor, critic=self.critic,
                             reward=self.reward, train=self.train,
                             packing=self.ds.packing_samples,
                             n_samples=self.rollout.n_samples_per_prompt,
                             temperature=self.rollout.temperature,
                             max_len=self.rollout.max_new_tokens or self.data.max_len or 0,  # one is set
                             max_tokens=self.train.max_tokens_per_gpu if dynamic else None,
                             rollout_max_tokens=self.rollout_max_tokens,
                             keep_groups=self.rollout.batch_size if self.refills else None)

    def plan_notes(self, plan: RunPlan) -> list[str]:
        """π_old's source, said before the run (`learn_config.pi_old_notes`)."""
        return pi_old_notes(plan, self.ds.param_dtype, self.staleness, self.algo.advantage)


def _estimator(name: Estimator, **algo):
    """The default factory of an algorithm section with `name`'s advantage estimator."""
    return lambda: AlgoConfig(advantage=EstimatorConfig(estimator=name), **algo)


@dataclass(frozen=True, kw_only=True)
class PPOConfig(RLConfig):
    """PPO with a critic (GAE)."""

    algo: AlgoConfig = field(default_factory=_estimator("gae"))
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    TRAINED: ClassVar[tuple[str, ...]] = ("actor", "critic")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.uses_generator:
            raise ConfigError("ppo runs synchronously on its hosts: asynchronous generation "
                              "(train.async_enable, async.*) and agent episodes "
                              "(train.agent_func_path) are for the critic-free flows "
                              "(grpo, rloo, reinforce_pp, reinforce_pp_baseline, dr_grpo)")


@dataclass(frozen=True, kw_only=True)
class RLOOConfig(RLConfig):
    algo: AlgoConfig = field(default_factory=_estimator("rloo"))


@dataclass(frozen=True, kw_only=True)
class ReinforceConfig(RLConfig):
    algo: AlgoConfig = field(default_factory=_estimator("reinforce"))
    rollout: RolloutConfig = field(default_factory=RolloutConfig)


@dataclass(frozen=True, kw_only=True)
class ReinforceBaselineConfig(RLConfig):
    algo: AlgoConfig = field(default_factory=_estimator("reinforce_baseline"))


@dataclass(frozen=True, kw_only=True)
class DrGRPOConfig(RLConfig):
    """Dr.GRPO (Liu et al. 2025): group-mean baseline without the std, and the loss summed
    over each response's tokens and divided by a constant (max_new_tokens × responses), so
    neither length nor group spread rescales the gradient. (OpenRLHF's `dr_grpo` changes
    only the advantage; its loss stays a token mean.)"""

    algo: AlgoConfig = field(default_factory=_estimator(
        "dr_grpo", loss_agg="seq-mean-token-sum-norm"))
