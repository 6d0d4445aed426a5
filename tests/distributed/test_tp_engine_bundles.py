"""Tensor-parallel vLLM engines in Ray actors (issue 21 §3.13): each engine's placement group
is one bundle of `tensor_parallel_size` GPUs on one node, its actor reserves them all (vLLM's
`mp` executor starts the tensor-parallel workers inside the actor, one per visible GPU), the
engines' GPUs are disjoint, and an engine the cluster cannot hold is one line, not a hang.

On a Ray that advertises 8 GPUs this machine lacks (`fake_gpu_ray`), with the real
`VLLMEngineActor` placement code and a probe in place of the vLLM engine it would build."""

from __future__ import annotations

import pytest

from tests.fixtures.ranks import run_ranks

pytestmark = pytest.mark.slow


class Probe:
    """Stands for `vllm_actor.EngineHost`: reports what its actor was given."""

    def __init__(self, model_path, config, policy_version) -> None:
        self.tp = config.tensor_parallel_size

    def version(self) -> int:
        return 0

    def progress(self) -> int:  # asked while a call is out (`tasks/engines/vllm/liveness.py`)
        return 0

    def placed(self) -> dict:
        import os

        import ray

        return {"gpu_ids": sorted(int(i) for i in ray.get_gpu_ids()),
                "visible": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
                "executor": "uni" if self.tp == 1 else "mp"}


def _engines(rank: int, world: int, port: int, tp: int, count: int) -> dict:
    from alignflow.errors import ConfigError
    from alignflow.tasks.engines.vllm import actor as vllm_actor
    from alignflow.tasks.engines.vllm import placement
    from alignflow.tasks.engines.vllm.config import VLLMSection
    from tests.fixtures.ray import fake_gpu_ray

    vllm_actor.EngineHost = Probe
    config = VLLMSection(tensor_parallel_size=tp).engine_config(dtype="bf16", on_gpu=True,
                                                               colocated=False)
    with fake_gpu_ray(gpus=8) as ray:
        engines = vllm_actor.VLLMEngineActor("model", config, num_engines=count, on_gpu=True)
        placed = ray.get([a.placed.remote() for a in engines._actors])
        kwargs = config.llm_kwargs("model", on_gpu=True)
        try:
            placement.reserve(engines._bundle(), 2.0, count)
            refused = ""
        except ConfigError as exc:
            refused = str(exc)
        engines.shutdown()
    return {"placed": placed, "refused": refused,
            "backend": kwargs["distributed_executor_backend"]}


def test_tensor_parallel_engines_get_disjoint_gpus_of_one_node():
    (out,) = run_ranks(_engines, 1, 2, 4)
    assert isinstance(out, dict), out
    assert out["backend"] == "mp"
    ids = [p["gpu_ids"] for p in out["placed"]]
    assert all(len(i) == 2 for i in ids) and sorted(sum(ids, [])) == list(range(8))
    for p in out["placed"]:
        assert sorted(int(v) for v in p["visible"].split(",")) == p["gpu_ids"]
    assert out["refused"].startswith("vLLM engine 4: no node could reserve")
    assert "\n" not in out["refused"] and "8 GPU" in out["refused"]
