"""A supervised run's worker group is taken over by the next driver whatever moment its
driver died at (`flows/ray/adopt.settle`), on a real Ray runtime with a real gloo group:
- a driver killed between two ranks' `.remote()` of one call left rank 0 inside the call's
  broadcast, waiting for a rank that never got it: the take-over gives the call to that
  rank too, both finish it, and the group is adopted at once (it waited 20 s for an answer
  that never came and formed the group again);
- the dead driver's own copy of that call, still on its way, is not run a second time;
- a group at rest is adopted with the number of its last call, and serves the next one."""

from __future__ import annotations

import os
import time

import pytest

from alignflow.flows.ray import adopt
from alignflow.flows.ray.groups import RayWorkerGroup
from alignflow.tasks.distributed.ray_group import GroupMember

pytestmark = pytest.mark.slow

OPTIONS = {"num_nodes": 1, "workers_per_node": 2, "num_cpus": 0.1}


class _Member(GroupMember):
    def __init__(self) -> None:
        self.broadcasts = 0

    def group_on_gpu(self) -> bool:
        return False


def _broadcast(member: _Member, value: float) -> float:
    """A collective: every rank of the group must run it, or rank 0 waits forever."""
    import torch
    import torch.distributed as dist

    tensor = torch.tensor([value if dist.get_rank() == 0 else 0.0])
    dist.broadcast(tensor, src=0)
    member.broadcasts += 1
    return float(tensor.item())


def _count(member: _Member) -> int:
    return member.broadcasts


def _call(fn, *args) -> dict:
    return {"store": None, "run_id": "r", "task_key": fn.__name__, "seed": 0, "attempt": 1,
            "fn": fn, "args": args, "kwargs": {}, "worker": True}


def _counts(group: RayWorkerGroup) -> list[int]:
    """Each rank's broadcast count (rank 0's result of a non-collective call per rank)."""
    import ray

    return [ray.get(a.call.remote(dict(_call(_count), rank=r, world_size=2)))["output"]
            for r, a in enumerate(group.actors)]


@pytest.fixture
def supervised_group(ray_local, monkeypatch):
    monkeypatch.setenv(adopt.SUPERVISED_ENV, "1")
    group = RayWorkerGroup("actor", _Member, OPTIONS, f"t{os.getpid()}{time.time_ns()}").start()
    yield group
    group.kill()


def test_a_call_given_to_rank_0_only_is_completed_and_the_group_adopted(supervised_group):
    import ray

    group = supervised_group
    assert group.submit(_call(_broadcast, 1.0)).wait()["output"] == 1.0
    group.seq += 1  # the driver dies after rank 0's `.remote()`, before rank 1's
    call = dict(_call(_broadcast, 2.0), rank=0, world_size=2, group_seq=group.seq)
    orphan = group.actors[0].call.remote(call)
    time.sleep(0.5)  # rank 0 is inside the broadcast now
    started = time.time()
    heir = RayWorkerGroup(group.name, _Member, OPTIONS, group.run_id).adopt()
    took = time.time() - started
    assert heir is not None, "the group was not adopted"
    assert took < 10, f"the take-over took {took:.1f}s"
    assert ray.get(orphan)["output"] == 2.0  # rank 0's broadcast finished with rank 1
    assert heir.seq == 2 == group.seq
    late = heir.actors[1].call.remote(dict(call, rank=1))  # the dead driver's copy, late
    assert ray.get(late) == {"error": None, "duplicate": 2}
    assert _counts(heir) == [2, 2]  # each rank broadcast twice, no more
    assert heir.submit(_call(_broadcast, 3.0)).wait()["output"] == 3.0


def test_a_group_at_rest_is_adopted_with_its_last_call_number(supervised_group):
    group = supervised_group
    for value in (1.0, 2.0, 3.0):
        group.submit(_call(_broadcast, value)).wait()
    heir = RayWorkerGroup(group.name, _Member, OPTIONS, group.run_id).adopt()
    assert heir is not None and heir.seq == 3
    assert heir.submit(_call(_broadcast, 4.0)).wait()["output"] == 4.0
    assert _counts(heir) == [4, 4]
