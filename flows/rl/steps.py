"""The RL steps as journalled tasks, and the model hosts a flow declares.

The step functions live in `alignflow.tasks.rl` (importable without the engine); this
module wraps them as `@task`s and places them on the hosts of their roles.
"""

from __future__ import annotations

import functools

from alignflow.flows.engine import Done, task
from alignflow.flows.rl.config import RLConfig
from alignflow.flows.workers import worker_group
from alignflow.tasks.rl import learn, reference
from alignflow.tasks.rl.rollout_host import RolloutHost, RolloutSpec
from alignflow.tasks.steps.host import HostSpec, ModelHost
from alignflow.tasks.steps.placement import Role, check_gpus, host_workers, worker_gpus
from alignflow.tasks.steps.rollout_engine import EngineSpec

reference_logprobs = task(version=1)(reference.reference)
critic_values = task(version=1)(reference.values)
learn_actor = task(version=1)(learn.learn_actor)
learn_critic = task(version=1)(learn.learn_critic)


def declare_hosts(cfg: RLConfig, roles: tuple[Role, ...], iterations: int) -> dict[Role, str]:
    """One worker group per host of the placement; returns role -> host (worker) name."""
    steps, checkpointing = cfg.optimizer_steps(iterations), cfg.actor.gradient_checkpointing_enable
    actor = cfg.actor.trainer_config(steps, cfg.train, cfg.ds,
                                     gradient_checkpointing=checkpointing)
    critic = cfg.critic.trainer_config(steps, cfg.train, cfg.ds,
                                       gradient_checkpointing=checkpointing)
    offload = tuple(r for r, on_ in (("ref", cfg.ref.offload), ("reward", cfg.reward.offload))
                    if on_)
    hosts = cfg.train.hosts(roles)
    layouts = {host: host_workers(rs, {r: getattr(cfg, r) for r in rs})
               for host, rs in hosts.items()}
    per_worker = worker_gpus(cfg.placement)
    check_gpus(per_worker * sum(w.workers for w in layouts.values()),
               "the placement of " + ", ".join(roles))
    for host, host_roles in hosts.items():
        spec = HostSpec(roles=host_roles, pretrain=cfg.actor.model_name_or_path,
                        ref_pretrain=cfg.ref.model_name_or_path,
                        critic_pretrain=cfg.critic.model_name_or_path, dtype=cfg.ds.param_dtype,
                        actor_trainer=actor,
                        critic_trainer=critic if "critic" in host_roles else None,
                        rewards=cfg.reward if "reward" in host_roles else None,
                        micro_rollout_batch_size=cfg.rollout.micro_batch_size,
                        num_threads=cfg.num_threads, keep_checkpoints=cfg.checkpoints_kept,
                        offload=offload, num_gpus=per_worker,
                        attn_implementation=cfg.ds.attn_implementation,
                        trainer_sleep=cfg.ds.enable_sleep, ds=cfg.ds,
                        engine=EngineSpec(name=cfg.rollout.engine, vllm=cfg.vllm,
                                          colocated=cfg.train.all_in_one))
        workers = layouts[host]
        worker_group(host, functools.partial(ModelHost, spec), num_cpus=cfg.placement.num_cpus,
                     num_gpus=per_worker, label=_label(host_roles, roles),
                     num_nodes=workers.num_nodes, workers_per_node=workers.num_gpus_per_node)
    return {role: cfg.train.host_of(role) for role in roles}


def declare_generator(cfg: RLConfig, name: str) -> str:
    """The generator worker of an asynchronous run (or of agent episodes): an engine only."""
    spec = RolloutSpec(pretrain=cfg.actor.model_name_or_path, dtype=cfg.ds.param_dtype,
                       micro_rollout_batch_size=cfg.rollout.micro_batch_size,
                       num_threads=cfg.num_threads, agent_func_path=cfg.train.agent_func_path,
                       engine=EngineSpec(name=cfg.rollout.engine, vllm=cfg.vllm),
                       num_gpus=cfg.placement.num_gpus)
    return worker_group(name, functools.partial(RolloutHost, spec),
                        num_cpus=cfg.placement.num_cpus, num_gpus=cfg.placement.num_gpus)


def _label(host_roles: tuple[Role, ...], roles: tuple[Role, ...]) -> str:
    """What the progress line says about a host: its roles, and the reference if skipped."""
    skipped = "" if "ref" in roles or "actor" not in host_roles else \
        " (no reference model: no KL term uses it)"
    return "roles " + ", ".join(host_roles) + skipped


def reference_step(cfg: RLConfig, host: dict[Role, str], key: str, rollouts, iteration: int):
    """The reference step's future; an already resolved None when the run has no `ref` role."""
    if "ref" not in host:
        return Done(None)
    return on(reference_logprobs, host["ref"], key).submit(
        rollouts, iteration, cfg.rollout.micro_batch_size, cfg.rollout.temperature)



def on(step, host: str, key: str):
    """`step` bound to a host and a task key."""
    return step.options(worker=host, key=key)
