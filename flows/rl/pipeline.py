"""Which rollout source a run uses: the synchronous loop on the actor's host (refilled until
enough groups pass dynamic filtering), a generator
worker on a fixed schedule (asynchronous up to `async.max_staleness`, agent episodes), or
partial rollouts. The flows call `take`, `score` and `learn` on it and nothing else."""

from __future__ import annotations

from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.partial import PartialRollouts
from alignflow.flows.rl.refill import RefilledRollouts
from alignflow.flows.rl.rollouts import ScheduledRollouts, SyncRollouts
from alignflow.flows.rl.steps import declare_generator
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.steps.records import StepOutput


def rollouts_for(cfg: RLConfig, plan: RunPlan, prompts: StepOutput, hosts: dict[str, str],
                 iterations: int) -> SyncRollouts:
    """The rollout source of `cfg` (declaring the plan's generator worker when it has one)."""
    if plan.generator is None:
        cls = RefilledRollouts if cfg.refills else SyncRollouts
        return cls(cfg, prompts, hosts, iterations)
    declare_generator(cfg, plan)
    cls = PartialRollouts if cfg.train.partial_rollout_enable else ScheduledRollouts
    return cls(cfg, prompts, hosts, iterations)
