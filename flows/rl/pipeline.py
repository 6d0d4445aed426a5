"""Which rollout source a run uses: the synchronous loop on the actor's host (refilled until
enough groups pass dynamic filtering), a generator
worker on a fixed schedule (asynchronous up to `async.max_staleness`, agent episodes), or
partial rollouts. The flows call `take`, `score` and `learn` on it and nothing else."""

from __future__ import annotations

from typing import NamedTuple

from alignflow.flows.control import planning
from alignflow.flows.engine import expect
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.evaluation import Evaluation
from alignflow.flows.rl.partial import PartialRollouts
from alignflow.flows.rl.refill import RefilledRollouts
from alignflow.flows.rl.rollouts import RolloutSource, ScheduledRollouts, SyncRollouts
from alignflow.flows.rl.shared_steps import load_prompts
from alignflow.flows.rl.steps import declare_generator, declare_hosts
from alignflow.tasks.plan.placement import Role
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.steps.records import StepOutput


def rollouts_for(cfg: RLConfig, plan: RunPlan, prompts: StepOutput, hosts: dict[Role, str],
                 iterations: int) -> RolloutSource:
    """The rollout source of `cfg` (declaring the plan's generator worker when it has one)."""
    if plan.generator is None:
        cls = RefilledRollouts if cfg.refills else SyncRollouts
        return cls(cfg, prompts, hosts, iterations)
    declare_generator(cfg, plan)
    cls = PartialRollouts if cfg.train.partial_rollout_enable else ScheduledRollouts
    return cls(cfg, prompts, hosts, iterations)


class RLStart(NamedTuple):
    """What an RL flow starts from."""

    prompts: StepOutput
    iterations: int
    plan: RunPlan
    host: dict[Role, str]
    source: RolloutSource
    evals: Evaluation


def start(cfg: RLConfig) -> RLStart:
    """The RL flows' start: the prompts (once, task `prompts`), the iterations they make
    (said to the progress display), the plan, one worker group per host, the rollout source
    and the evaluation."""
    prompts = load_prompts.options(key="prompts")(
        cfg.data, cfg.actor.model_name_or_path, cfg.rollout.max_new_tokens)
    iterations = cfg.iterations(prompts.rows)
    expect(iterations)
    plan = planning.current(cfg)
    host = declare_hosts(cfg, plan, iterations)
    source = rollouts_for(cfg, plan, prompts, host, iterations)
    evals = Evaluation(cfg, host)
    evals.start(source.latest)  # eval.at_start: the untrained policy's held-out score
    return RLStart(prompts, iterations, plan, host, source, evals)
