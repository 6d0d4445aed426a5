"""Asynchronous RL and agent episodes in an RL run's config.

OpenRLHF 0.11's keys are in `train.*` (`AsyncTrainKeys`): `async_enable` overlaps
generation and learning, `async_queue_size` is how many batches generation may run ahead
(its queue), `partial_rollout_enable` lets a weight update land inside a batch being
generated, `agent_func_path` makes rollouts multi-turn agent episodes. alignflow's own keys
are in `async.*` (`AsyncConfig`): `max_staleness` states the bound directly — while
iteration k learns, the generator makes the batches of k+1 … k+s, so every batch is learned
at most s policy versions after the weights that sampled it; 0 is the synchronous loop.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from alignflow.errors import ConfigError, require

StaleAction = Literal["regenerate", "drop"]


@dataclass(frozen=True, kw_only=True)
class AsyncTrainKeys:
    """OpenRLHF's `train.*` switches of asynchronous and agent RL.

    async_enable: overlap generation (a worker of its own) with learning
    async_queue_size: batches generation may run ahead of learning when async_enable (the staleness bound)
    partial_rollout_enable: generate in segments; a weight update lands between segments and the unfinished responses continue with the new weights
    agent_func_path: a .py file defining AgentExecutor (OpenRLHF's agent API): rollouts become multi-turn episodes and the environment gives the reward
    """

    async_enable: bool = False
    async_queue_size: int = 1
    partial_rollout_enable: bool = False
    agent_func_path: str | None = field(default=None, metadata={"refers": "code"})


@dataclass(frozen=True, kw_only=True)
class AsyncConfig:
    """alignflow's keys of asynchronous RL (the store is the rollout buffer)."""

    max_staleness: int | None = field(default=None, metadata={
        "help": "policy versions generation may run ahead of learning (0: synchronous; "
                "null: train.async_queue_size when train.async_enable, else 0)"})
    segment_tokens: int | None = field(default=None, metadata={
        "help": "new tokens per segment with train.partial_rollout_enable (null: a quarter "
                "of rollout.max_new_tokens)"})
    on_stale: StaleAction = field(default="regenerate", metadata={
        "help": "a batch older than the bound when its learn step comes: regenerate it with "
                "the current weights, or drop it (counted in metrics)"})
    generator_worker: bool | None = field(default=None, metadata={
        "help": "generate on a worker of its own (null: when asynchronous or with an agent); "
                "a synchronous run then passes the weights through the checkpoint"})
    replay_schedule: str | None = field(default=None, metadata={
        "help": "run id in the same store whose recorded segment versions this run follows "
                "(reproduces a partial-rollout run whose timing decided them)"})

    def __post_init__(self) -> None:
        if self.max_staleness is not None:
            require(self.max_staleness >= 0, "max_staleness", "an integer >= 0 or null",
                    self.max_staleness)
        require(self.on_stale in get_args(StaleAction), "on_stale",
                f"one of {get_args(StaleAction)}", self.on_stale)
        if self.segment_tokens is not None:
            require(self.segment_tokens >= 1, "segment_tokens", "an integer >= 1 or null",
                    self.segment_tokens)

    def segment_length(self, max_new_tokens: int) -> int:
        """Tokens per segment: the configured value, else a quarter of the response budget."""
        if self.segment_tokens is not None:
            return min(self.segment_tokens, max_new_tokens)
        return max(1, math.ceil(max_new_tokens / 4))


def staleness(train: AsyncTrainKeys, cfg: AsyncConfig) -> int:
    """The bound in force: `async.max_staleness`, else OpenRLHF's queue size when on."""
    if cfg.max_staleness is not None:
        return cfg.max_staleness
    return train.async_queue_size if train.async_enable else 0


def check(train: AsyncTrainKeys, cfg: AsyncConfig) -> None:
    """The combinations refused before anything runs (one line each)."""
    bound = staleness(train, cfg)
    require(train.async_queue_size >= 1, "train.async_queue_size", "an integer >= 1",
            train.async_queue_size)
    if train.async_enable and bound == 0:
        raise ConfigError("train.async_enable with async.max_staleness=0: an asynchronous "
                          "run needs a bound >= 1")
    if train.partial_rollout_enable and bound == 0:
        raise ConfigError("train.partial_rollout_enable needs an asynchronous run: set "
                          "train.async_enable (or async.max_staleness >= 1)")
    if cfg.generator_worker is False and (bound > 0 or train.agent_func_path):
        raise ConfigError("async.generator_worker=false: asynchronous runs and agent episodes "
                          "generate on a worker of their own")
    if cfg.replay_schedule is not None and not train.partial_rollout_enable:
        raise ConfigError("async.replay_schedule replays partial-rollout segment versions; set "
                          "train.partial_rollout_enable (other schedules follow from the config)")
    if train.agent_func_path is not None:
        if not str(train.agent_func_path).endswith(".py"):
            raise ConfigError(f"train.agent_func_path={train.agent_func_path!r}: expected a .py "
                              "file defining AgentExecutor")
        if train.partial_rollout_enable:
            raise ConfigError("train.agent_func_path with train.partial_rollout_enable: agent "
                              "episodes are not generated in segments; turn one of them off")
