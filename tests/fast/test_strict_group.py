"""The strict group (`tasks/distributed/strict.py`) refuses what NCCL refuses, on gloo:
a CPU tensor on an NCCL-only group, a CUDA tensor off the rank's device, two ranks on one
GPU, a collective on a group the rank is not in; it carries what NCCL carries."""

from __future__ import annotations

import pytest
import torch

from alignflow.tasks.distributed import strict
from tests.fixtures.ranks import run_ranks, strict_world

DUAL = "cpu:gloo,cuda:nccl"


def _collectives(rank: int, world: int, port: int, backend: str) -> dict:
    import torch.distributed as dist

    strict_world(rank, world, port, backend)
    out: dict = {"backend": dist.get_backend()}
    x = torch.full((3,), float(rank + 1))
    try:
        dist.all_reduce(x)
        out["sum"] = x.tolist()
    except RuntimeError as exc:
        out["sum"] = str(exc)
    if "cpu" in strict.Emulated(backend=backend).device_types:
        y = torch.full((2,), float(rank + 1))
        dist.all_reduce(y, op=dist.ReduceOp.AVG)
        objects: list = [None] * world
        dist.all_gather_object(objects, {"rank": rank})
        out |= {"avg": y.tolist(), "objects": objects}
    dist.barrier()
    return out


def test_a_cpu_tensor_on_an_nccl_only_group_is_refused_as_nccl_refuses_it():
    results = run_ranks(_collectives, 2, "nccl")
    for result in results:
        assert result["backend"] == "strict"
        assert result["sum"].startswith("No backend type associated with device type cpu")


def test_a_group_with_a_cpu_backend_carries_cpu_tensors_and_objects():
    results = run_ranks(_collectives, 2, DUAL)
    for result in results:
        assert result["sum"] == [3.0, 3.0, 3.0]
        assert result["avg"] == [1.5, 1.5]  # NCCL averages; the stand-in does too
        assert result["objects"] == [{"rank": 0}, {"rank": 1}]


def _same_gpu(rank: int, world: int, port: int) -> str:
    strict_world(rank, world, port, "nccl", device="cuda:0")
    return "joined"


def test_two_ranks_on_one_gpu_are_refused_when_the_group_forms():
    results = run_ranks(_same_gpu, 2)
    assert all("Duplicate GPU detected: ranks [0, 1]" in r for r in results), results


def _outsider(rank: int, world: int, port: int) -> str:
    import torch.distributed as dist

    strict_world(rank, world, port, DUAL)
    sub = dist.new_group([0])
    dist.all_reduce(torch.ones(1), group=sub)
    return "reduced"


def test_a_collective_on_a_group_the_rank_is_not_in_is_refused():
    member, outsider = run_ranks(_outsider, 2)
    assert member == "reduced"
    # torch's c10d logger re-raises it as "Invalid process group specified"; ours is its cause
    assert "not in the given group" in outsider, outsider


class _OnDevice:
    """Stands for a tensor on `device` (the check reads `.device` only; no GPU here)."""

    def __init__(self, device: str) -> None:
        self.device = torch.device(device)


def test_the_emulated_device_types_follow_the_backend_spec():
    assert strict.Emulated(backend="nccl").device_types == {"cuda"}
    assert strict.Emulated(backend=DUAL).device_types == {"cpu", "cuda"}
    assert strict.Emulated(backend="gloo").device_types == {"cpu", "cuda"}
    rank1 = strict.Emulated(backend="nccl", device="cuda:1")
    rank1.check(_OnDevice("cuda:1"), "broadcast")
    with pytest.raises(RuntimeError, match="tensor on cuda:0, but this rank's device is cuda:1"):
        rank1.check(_OnDevice("cuda:0"), "broadcast")


def test_a_rank_under_ray_or_torchrun_is_placed_on_its_own_gpu(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,5,6,7")
    assert strict.Emulated.for_rank("nccl", local_rank=2).device == "cuda:6"
    assert strict.Emulated.for_rank(DUAL, local_rank=0).device == "cuda:4"
    assert strict.Emulated.for_rank("gloo", local_rank=1).device == "cpu"


def _joined_by_env(rank: int, world: int, port: int) -> tuple[str, str]:
    import os

    import torch.distributed as dist

    from alignflow.tasks.distributed import group

    os.environ[strict.ENV] = "1"
    os.environ["CUDA_VISIBLE_DEVICES"] = "0,1"
    group.join(group.GroupSpec(rank=rank, world_size=world, master_addr="127.0.0.1",
                               master_port=port, backend="nccl", local_rank=rank))
    world_group = dist.distributed_c10d._get_default_group()
    return dist.get_backend(), world_group.emulated.device


def test_group_join_forms_a_strict_group_where_the_environment_asks():
    assert run_ranks(_joined_by_env, 2) == [("strict", "cuda:0"), ("strict", "cuda:1")]
