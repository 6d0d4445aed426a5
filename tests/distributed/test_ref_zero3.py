"""Reference and reward models sharded like the actor (issue 42): when the run trains at
ZeRO-3, a model host holds its frozen models as DeepSpeed ZeRO-3 eval engines
(`tasks/trainers/deepspeed/frozen.py`), so each of two CPU ranks (gloo) keeps half of their
parameter bytes, and what they compute equals a whole replica's within float32 rounding."""

from __future__ import annotations

import pytest

from tests.fixtures.ranks import run_ranks

pytest.importorskip("deepspeed")
pytestmark = pytest.mark.slow


def _host(model_dir: str, rm_dir: str, offload: tuple[str, ...]):
    from alignflow.tasks.plan.hosts import HostPlan
    from alignflow.tasks.rewards.registry import RewardConfig
    from alignflow.tasks.steps.host import ModelHost
    from alignflow.tasks.steps.host_spec import HostSpec
    from alignflow.tasks.trainers.deepspeed.section import DSConfig

    plan = HostPlan(name="frozen", roles=("ref", "reward"))
    return ModelHost(HostSpec(plan=plan, pretrain=model_dir, offload=offload,
                              rewards=RewardConfig(model_name_or_path=rm_dir),
                              ds=DSConfig(trainer="deepspeed", zero_stage=3)))


def _rows(seed: int):
    import torch

    g = torch.Generator().manual_seed(seed)
    prompts = [torch.randint(4, 500, (n,), generator=g).tolist() for n in (5, 9, 3)]
    responses = [torch.randint(4, 500, (n,), generator=g).tolist() for n in (7, 4, 6)]
    return prompts, responses


def _compare(rank: int, world: int, port: int, model_dir: str, rm_dir: str,
             offload: tuple[str, ...]) -> dict:
    import torch

    from alignflow.tasks.distributed import group
    from alignflow.tasks.modeling.forward import response_logprobs
    from alignflow.tasks.modeling.loading import load_causal_lm
    from alignflow.tasks.trainers.deepspeed.frozen import local_bytes

    group.join(group.GroupSpec(rank=rank, world_size=world, master_addr="127.0.0.1",
                               master_port=port, backend="gloo", local_rank=rank))
    host = _host(model_dir, rm_dir, offload)
    prompts, responses = _rows(0)
    with torch.no_grad(), host.reference_model() as model:
        sharded, _ = response_logprobs(model, prompts, responses, packed=False, pad_id=0)
    with torch.no_grad():
        replica, _ = response_logprobs(load_causal_lm(model_dir).eval(), prompts, responses,
                                       packed=False, pad_id=0)
    (source,) = host.reward.sources.values()
    texts = ["a short answer", "a somewhat longer answer to score"]
    rm_sharded = source.score(texts, ["", ""], [None, None]).rewards
    held, whole = local_bytes(host.ref)
    rm_held, rm_whole = local_bytes(source.model)
    host.idle("ref")  # sharded: nothing to park, the shards stay where DeepSpeed keeps them
    with torch.no_grad(), host.reference_model() as model:
        again, _ = response_logprobs(model, prompts, responses, packed=False, pad_id=0)
    return {"held": held, "whole": whole, "rm_held": rm_held, "rm_whole": rm_whole,
            "diff": float((sharded - replica).abs().max()), "again": bool(torch.equal(again,
                                                                                      sharded)),
            "scale": float(replica.abs().max()), "rm": rm_sharded.tolist(),
            "offload": str(host.__dict__["_engines"]["ref"].zero_offload_param().device)}


@pytest.mark.parametrize("offload", [(), ("ref", "reward")])
def test_each_rank_holds_half_the_reference_and_reward_and_computes_as_a_replica(
        tiny_model_dir, tiny_rm_dir, offload):
    from transformers import AutoConfig

    from alignflow.tasks.rewards.model_rm import ModelRewardModel
    from tests.tolerance import network_bound

    results = run_ranks(_compare, 2, str(tiny_model_dir), str(tiny_rm_dir), offload)
    assert all(isinstance(r, dict) for r in results), results
    bound = network_bound(AutoConfig.from_pretrained(tiny_model_dir), results[0]["scale"])
    whole_rm = ModelRewardModel(str(tiny_rm_dir)).score(
        ["a short answer", "a somewhat longer answer to score"], ["", ""], [None, None])
    for r in results:
        # each rank holds its half of every tensor (a tensor of odd size: one padding element)
        assert r["held"] <= r["whole"] / 2 + 4 * 64, r
        assert r["rm_held"] <= r["rm_whole"] / 2 + 4 * 64, r
        assert r["diff"] <= bound, (r["diff"], bound)
        assert r["again"] and r["offload"].endswith("cpu" if offload else "none"), r
        assert r["rm"] == pytest.approx(whole_rm.rewards.tolist(), abs=bound), r
    assert results[0]["rm"] == results[1]["rm"]
