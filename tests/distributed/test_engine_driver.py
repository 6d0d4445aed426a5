"""Rank 0 of a data-parallel host drives its generation engine; the other ranks build none,
generate nothing, send nothing — and still take part in a ZeRO-3 sync's gathers (issue 21
§3.3: N ranks × K engines, N× duplicated generation, a placement timeout). Two ranks on the
group a GPU run forms, NCCL's refusals applied (`tasks/distributed/strict.py`)."""

from __future__ import annotations

import pytest

from tests.fixtures.ranks import run_ranks

pytest.importorskip("deepspeed")
pytestmark = pytest.mark.slow


def _host(model_dir: str):
    from alignflow.tasks.plan.hosts import EnginePlan, HostPlan, TrainerPlan
    from alignflow.tasks.steps.host import HostSpec, ModelHost
    from alignflow.tasks.trainers.base import TrainerConfig
    from alignflow.tasks.trainers.deepspeed.section import DSConfig

    ds = DSConfig(zero_stage=3)
    trainer = TrainerPlan(role="actor", backend="deepspeed", world_size=2, ds=ds,
                          config=TrainerConfig(lr=1e-2, lr_warmup_ratio=0.0, total_steps=2))
    plan = HostPlan(name="models", roles=("actor",), workers_per_node=2, trainers=(trainer,),
                    engine=EnginePlan(kind="hf", in_host=True, on_gpu=False))
    return ModelHost(HostSpec(plan=plan, pretrain=model_dir))


def _drive(rank: int, world: int, port: int, model_dir: str) -> dict:
    import torch

    from alignflow.tasks.engines.base import SamplingParams
    from alignflow.tasks.steps import generate, rollout_engine, sync
    from tests.distributed import dp_work
    from tests.fast.test_gpu_collectives import gpu_group

    gpu_group(rank, world, port)
    host = _host(model_dir)
    host.preload()
    built = "engine" in host.__dict__
    out = {"built": built, "followed": None, "samples": None}
    if not built:  # a follower's generate step: nothing sampled, nothing read
        out["followed"] = generate.generate(host, None, 0, None) == generate.StepOutput((), 0)
    else:
        params = SamplingParams(max_new_tokens=4, n=2, seed=1)
        out["samples"] = len(rollout_engine.generate(host, [[5, 6, 7]], params))
    host.actor.engine.module.train()
    dp_work.grpo_step(host.actor, 0)
    sync.sync(host, "unused", policy_version=1)  # in memory: gathers on both ranks
    host.policy_version = 2  # as if the engine restarted behind: rank 0 decides for both
    host.ensure_engine_synced()
    if built:
        weights = dict(host.actor.state_dict_for_sync())
        engine = host.engine.model.state_dict()
        out["synced"] = all(torch.equal(engine[k], v) for k, v in weights.items()
                            if k in engine)
        out["version"] = host.engine.policy_version
    else:
        host.actor.take_part_in_sync()  # the lead's gather above
    return out


def test_rank0_alone_drives_the_engine_and_the_followers_take_part_in_its_sync(
        tiny_model_dir):
    lead, follower = run_ranks(_drive, 2, str(tiny_model_dir))
    assert isinstance(lead, dict) and isinstance(follower, dict), (lead, follower)
    assert lead["built"] and not follower["built"]
    assert lead["samples"] == 2 and follower["followed"] is True
    assert lead["synced"] and lead["version"] == 2
