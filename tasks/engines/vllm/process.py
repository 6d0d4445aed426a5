"""Where an in-process vLLM engine's worker runs, and where a sync packs for it.

vLLM's `uni` executor runs the worker in the caller's process, and its
`init_distributed_environment` adopts an initialised torch.distributed default group as
its world. In a trainer's data-parallel rank that group is the trainer's: vLLM would build
its tensor-parallel groups over every trainer rank (a collective only rank 0 calls: a
hang). There the worker runs as a process of its own (`mp`), started without the
trainer group's variables, in a world of its own — as OpenRLHF's engines, always processes
of their own. A sync packs its buckets on the GPU for a worker in this process (handed over
by reference) and on the CPU for a worker in another one (what crosses is serialised).
At shutdown vLLM's in-process engine core destroys the process's default group, whoever
made it: the trainer's is kept (`trainer_group_kept`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import torch

# what torch.distributed's env:// rendezvous and DeepSpeed read: the trainer group's
TRAINER_GROUP_ENV = ("MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK",
                     "LOCAL_WORLD_SIZE", "GROUP_RANK", "ROLE_RANK", "TORCHELASTIC_RUN_ID")


def in_trainer_group() -> bool:
    """Whether this process is a rank of a torch.distributed group of several ranks (a
    data-parallel host): vLLM's in-process worker would take that group for its world
    (`init_distributed_environment` adopts an initialised default group)."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


@contextlib.contextmanager
def own_world() -> Iterator[None]:
    """While vLLM starts its worker process: none of the trainer group's variables, so the
    worker forms its own world of `tensor_parallel_size` ranks (as OpenRLHF's engines,
    which are processes of their own)."""
    saved = {k: os.environ.pop(k) for k in TRAINER_GROUP_ENV if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


@contextlib.contextmanager
def trainer_group_kept() -> Iterator[None]:
    """While an in-process engine shuts down: vLLM's engine core tears down "its"
    torch.distributed state (`destroy_process_group()` of the default group, whenever one
    is initialised), which in a trainer's process is the trainer's group. Its own groups
    (destroyed by name) go; the default group stays."""
    import torch.distributed as dist

    real = dist.destroy_process_group

    def destroy(group=None) -> None:
        if group is not None:
            real(group)
    dist.destroy_process_group = destroy
    try:
        yield
    finally:
        dist.destroy_process_group = real


def pack_device(on_gpu: bool, executor: str) -> torch.device:
    """Where a sync packs its buckets: on this GPU when the worker runs in this process
    (`uni`: the buffer is handed over by reference, GPU to GPU), on the CPU when the
    workers are other processes (`mp`: what crosses to them is serialised anyway)."""
    if on_gpu and executor == "uni":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")
