"""A torch.distributed group among N Ray actors: rank 0 picks the address, all join at once.

An actor class inherits `GroupMember`; the driver (or a flow's host manager) calls
`form_group(actors)`. Ray is imported only by `form_group`, so this module loads without it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from alignflow.tasks.distributed import group
from alignflow.tasks.distributed.group import Backend, GroupSpec


class GroupMember:
    """Mixin for Ray actor classes: the two calls `form_group` makes on each member, and
    `join_group`, the call alignflow's engine makes on each worker of a worker group."""

    def join_group(self, rank: int, world_size: int, master_addr: str, master_port: int) -> None:
        """Become rank `rank` of `world_size` (gloo on CPU, NCCL + gloo on GPU); blocks until
        all join."""
        backend = group.default_backend(self.group_on_gpu())
        group.join(GroupSpec(rank=rank, world_size=world_size, master_addr=master_addr,
                             master_port=master_port, backend=backend))

    def group_on_gpu(self) -> bool | None:
        """Whether this member computes on GPUs (None: where CUDA devices exist). Hosts
        answer from their plan, so a simulated cluster's fake GPUs get the GPU group."""
        return None

    def group_rendezvous(self, world_size: int, backend: Backend | None = None) -> GroupSpec:
        """On the would-be rank 0: its node address and a free port."""
        return group.rendezvous(world_size, backend=backend)

    def group_join(self, spec: GroupSpec) -> tuple[int, int]:
        """Join the group (blocks until every rank joins); returns (rank, world size)."""
        group.join(spec)
        return group.rank_and_size()

    def group_leave(self) -> None:
        group.leave()


def form_group(actors: Sequence[Any], *, backend: Backend | None = None,
               local_ranks: Sequence[int] | None = None, timeout_s: float = 300.0) -> GroupSpec:
    """Join `actors` (handles of `GroupMember` actors) into one group, rank = list position.

    `local_ranks` gives each actor its device index on its node (default 0: one GPU per
    actor, as Ray sets `CUDA_VISIBLE_DEVICES` per actor). Returns rank 0's spec.
    """
    import ray

    spec = ray.get(actors[0].group_rendezvous.remote(len(actors), backend))
    spec = GroupSpec(rank=0, world_size=spec.world_size, master_addr=spec.master_addr,
                     master_port=spec.master_port, backend=spec.backend, timeout_s=timeout_s)
    local = list(local_ranks) if local_ranks is not None else [0] * len(actors)
    ray.get([actor.group_join.remote(group.with_rank(spec, r, local[r]))
             for r, actor in enumerate(actors)])
    return spec
