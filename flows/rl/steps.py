"""The RL steps as journalled tasks, and the model hosts a flow declares.

The step functions live in `alignflow.tasks.rl` (importable without the engine); this
module wraps them as `@task`s and declares the hosts of the run's plan (`tasks/plan/`).
"""

from __future__ import annotations

import functools

from alignflow.errors import FlowError
from alignflow.flows.engine import Done, task
from alignflow.flows.lazyref import LazyRef
from alignflow.flows.ray.workers import plan_group
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.rl.shared_steps import MODEL_HOST
from alignflow.tasks.plan.placement import Role, is_role
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.rl.rollout_spec import RolloutSpec
from alignflow.tasks.steps.host_spec import HostSpec

# The bodies and hosts run in workers; the driver names them (`flows/lazyref.py`).
ROLLOUT_HOST = LazyRef("alignflow.tasks.rl.rollout_host:RolloutHost")

reference_logprobs = task(version=1)("alignflow.tasks.rl.reference:reference")
critic_values = task(version=1)("alignflow.tasks.rl.reference:values")
learn_actor = task(version=1)("alignflow.tasks.rl.learn:learn_actor")
learn_critic = task(version=1)("alignflow.tasks.rl.learn_critic:learn_critic")


def planned_peak(plan: RunPlan, roles: tuple[str, ...]) -> int | None:
    """The plan's peak bytes of the GPU holding these roles (`tasks/plan/memory/`), recorded
    beside each step's measured peak; None where the plan has no GPUs or a size is unknown."""
    peaks = [plan.memory.peak_of(r) for r in roles] if plan.memory is not None else []
    known = [p for p in peaks if p is not None]
    return max(known) if known else None


def declare_hosts(cfg: RLConfig, plan: RunPlan, iterations: int) -> dict[Role, str]:
    """One worker group per host of the plan; returns role -> host (worker) name."""
    plan.check_runnable()
    steps = cfg.optimizer_steps(iterations)
    offloaded: tuple[tuple[Role, bool], ...] = (("ref", cfg.ref.offload),
                                                ("reward", cfg.reward.offload))
    offload = tuple(r for r, on_ in offloaded if on_)
    sampled_by = plan.generation.kind if plan.generation else "hf"  # HostSpec's default
    for host in plan.hosts:
        spec = HostSpec(plan=host.for_steps(steps), engines=plan.engines_of(host),
                        sampled_by=sampled_by, pretrain=cfg.actor.model_name_or_path,
                        ref_pretrain=cfg.ref.model_name_or_path,
                        critic_pretrain=cfg.critic_start, dtype=cfg.ds.param_dtype,
                        critic_normalize=cfg.reward.normalize_enable,
                        ema_beta=cfg.train.ema_beta if cfg.train.enable_ema else None,
                        rewards=cfg.reward if "reward" in host.roles else None,
                        micro_rollout_batch_size=cfg.rollout.micro_batch_size,
                        num_threads=cfg.num_threads, keep_checkpoints=cfg.checkpoints_kept,
                        offload=offload, attn_implementation=cfg.ds.attn_implementation,
                        trainer_sleep=cfg.ds.enable_sleep, ds=cfg.ds,
                        planned_peak=planned_peak(plan, host.roles))
        plan_group(host, functools.partial(MODEL_HOST, spec))
    return {role: plan.host_of(role) for role in plan.roles if is_role(role)}


def declare_generator(cfg: RLConfig, plan: RunPlan) -> str:
    """The generator worker of an asynchronous run (or of agent episodes): an engine only."""
    host = plan.generator
    if host is None:
        raise FlowError("the run plan has no generator worker (an asynchronous run or agent "
                        "episodes plan one: tasks/plan/build.py)")
    spec = RolloutSpec(plan=host, engines=plan.engines_of(host),
                       pretrain=cfg.actor.model_name_or_path, dtype=cfg.ds.param_dtype,
                       micro_rollout_batch_size=cfg.rollout.micro_batch_size,
                       num_threads=cfg.num_threads, agent_func_path=cfg.train.agent_func_path)
    return plan_group(host, functools.partial(ROLLOUT_HOST, spec))


def reference_step(cfg: RLConfig, host: dict[Role, str], key: str, rollouts, iteration: int):
    """The reference step's future; an already resolved None when the run has no `ref` role."""
    if "ref" not in host:
        return Done(None)
    budget = {"max_tokens": cfg.rollout_max_tokens} if cfg.rollout_max_tokens else {}
    return on(reference_logprobs, host["ref"], key).submit(
        rollouts, iteration, cfg.rollout.micro_batch_size, cfg.rollout.temperature, **budget)



def on(step, host: str, key: str):
    """`step` bound to a host and a task key."""
    return step.options(worker=host, key=key)
