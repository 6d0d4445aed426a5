"""The RL steps as journalled tasks, and the model hosts a flow declares.

The step functions live in `alignflow.tasks.rl` (importable without the engine); this
module wraps them as `@task`s and places them on the hosts of their roles.
"""

from __future__ import annotations

import functools

from alignflow.flows.engine import task
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.workers import worker_group
from alignflow.tasks.rl import learn, reference
from alignflow.tasks.steps.host import HostSpec, ModelHost
from alignflow.tasks.steps.placement import Role

reference_logprobs = task(version=1)(reference.reference)
critic_values = task(version=1)(reference.values)
learn_actor = task(version=1)(learn.learn_actor)
learn_critic = task(version=1)(learn.learn_critic)


def declare_hosts(cfg: RLConfig, roles: tuple[Role, ...], iterations: int) -> dict[Role, str]:
    """One worker group per host of the placement; returns role -> host (worker) name."""
    steps = cfg.optimizer_steps(iterations)
    actor = cfg.optim.trainer(steps, cfg.model)
    critic = cfg.optim.trainer(steps, cfg.model, learning_rate=cfg.optim.critic_learning_rate)
    for host, host_roles in cfg.placement.hosts(roles).items():
        spec = HostSpec(roles=host_roles, models=cfg.model, actor_trainer=actor,
                        critic_trainer=critic if "critic" in host_roles else None,
                        rewards=cfg.rewards if "reward" in host_roles else None,
                        micro_rollout_batch_size=cfg.generate.micro_rollout_batch_size,
                        num_threads=cfg.num_threads, keep_checkpoints=cfg.keep_checkpoints,
                        offload_idle=cfg.placement.offload_idle)
        worker_group(host, functools.partial(ModelHost, spec), num_cpus=cfg.placement.num_cpus,
                     num_gpus=cfg.placement.num_gpus)
    return {role: cfg.placement.host_of(role) for role in roles}


def on(step, host: str, key: str):
    """`step` bound to a host and a task key."""
    return step.options(worker=host, key=key)
