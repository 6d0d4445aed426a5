"""Joining a torch.distributed process group: one process, torchrun, or N Ray actors.

Rank 0 picks the rendezvous address (its node IP and a free port) and every rank joins with
the same `GroupSpec`. The standard variables (`MASTER_ADDR`, `MASTER_PORT`, `RANK`,
`WORLD_SIZE`, `LOCAL_RANK`) are set as well, because DeepSpeed reads them when it adopts the
group. A process alone (no torchrun, no Ray group) gets a world of one on loopback.
"""

from __future__ import annotations

import atexit
import datetime
import os
import socket
import sys
from dataclasses import dataclass
from typing import Literal, get_args

import torch.distributed as dist

from alignflow.errors import ConfigError
from alignflow.tasks.distributed import interfaces, settle, strict
from alignflow.tasks.simulate import node

Backend = Literal["gloo", "nccl", "cpu:gloo,cuda:nccl"]
# On GPUs a group has both: NCCL carries CUDA tensors (gradients, ZeRO's partitions), gloo
# the CPU ones (step statistics, counts, pickled objects). An NCCL-only group refuses a CPU
# tensor ("No backend type associated with device type cpu") at the first statistic.
GPU_BACKEND: Backend = "cpu:gloo,cuda:nccl"
TORCHRUN_VARS = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")


@dataclass(frozen=True, kw_only=True)
class GroupSpec:
    """Where and how one rank joins: the same address, port, size and backend on every rank."""

    rank: int
    world_size: int
    master_addr: str
    master_port: int
    backend: Backend = "gloo"
    local_rank: int = 0
    timeout_s: float = 300.0

    def __post_init__(self) -> None:
        if not 0 <= self.rank < self.world_size:
            raise ConfigError(f"GroupSpec.rank={self.rank}: expected 0 <= rank < "
                              f"world_size={self.world_size}")
        if self.backend not in get_args(Backend):
            raise ConfigError(f"GroupSpec.backend={self.backend!r}: expected one of "
                              f"{get_args(Backend)}")


def default_backend(on_gpu: bool | None = None) -> Backend:
    """`GPU_BACKEND` for ranks on GPUs (default: where CUDA devices exist, fake ones of a
    simulated cluster too, whose groups are strict stand-ins), gloo on CPU."""
    on_gpu = node.gpu_process() if on_gpu is None else on_gpu
    return GPU_BACKEND if on_gpu else "gloo"


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nobody listens on right now (the OS picks it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def node_address() -> str:
    """This node's IP as other nodes reach it (Ray's view when inside Ray, else loopback)."""
    try:
        import ray

        if ray.is_initialized():
            return ray.util.get_node_ip_address()
    except ImportError:
        pass
    return "127.0.0.1"


def rendezvous(world_size: int, *, backend: Backend | None = None) -> GroupSpec:
    """Rank 0's spec: its address and a free port; give the others `with_rank(spec, r)`."""
    addr = node_address()
    return GroupSpec(rank=0, world_size=world_size, master_addr=addr,
                     master_port=free_port(addr),
                     backend=backend or default_backend())


def with_rank(spec: GroupSpec, rank: int, local_rank: int = 0) -> GroupSpec:
    return GroupSpec(rank=rank, world_size=spec.world_size, master_addr=spec.master_addr,
                     master_port=spec.master_port, backend=spec.backend,
                     local_rank=local_rank, timeout_s=spec.timeout_s)


def join(spec: GroupSpec) -> None:
    """Initialise the default process group; blocks until all `world_size` ranks have joined."""
    if dist.is_initialized():
        raise ConfigError(f"join(rank={spec.rank}): this process is already in a process group "
                          f"of {dist.get_world_size()}; call leave() first")
    rank_env = dict(MASTER_ADDR=spec.master_addr, MASTER_PORT=str(spec.master_port),
                    RANK=str(spec.rank), WORLD_SIZE=str(spec.world_size),
                    LOCAL_RANK=str(spec.local_rank),
                    **interfaces.interface_env(interfaces.node_address()))
    for key in rank_env:  # the first join since the last leave saw what was there before
        _JOIN_ENV_BEFORE.setdefault(key, os.environ.get(key))
    os.environ.update(rank_env)
    backend, options = _backend(spec.backend, spec.local_rank)
    dist.init_process_group(
        backend, init_method=f"tcp://{spec.master_addr}:{spec.master_port}",
        rank=spec.rank, world_size=spec.world_size, pg_options=options,
        timeout=datetime.timedelta(seconds=spec.timeout_s))
    _leave_at_exit()


def _leave_at_exit() -> None:
    """A process that ends in its group leaves it while Python is still whole, and lets
    gloo's workers finish first: one still releasing a collective's tensors when the
    interpreter is torn down aborts the process (SIGABRT, "terminate called without an
    active exception": torchrun ranks in CI; `settle.py` says why)."""
    atexit.unregister(_leave_for_exit)
    atexit.register(_leave_for_exit)


def _destroy_groups() -> None:
    """Every group, and DeepSpeed's references to them where DeepSpeed adopted the group:
    its cached clone of the world would otherwise outlive it, and the next engine in this
    process would use it ("Group ... is not registered")."""
    deepspeed_comm = sys.modules.get("deepspeed.comm.comm")
    backend = getattr(deepspeed_comm, "cdb", None)
    if backend is not None and backend.is_initialized():
        deepspeed_comm.destroy_process_group()
    else:
        dist.destroy_process_group()


def _leave_for_exit() -> None:
    leave()
    settle.settle()


def _backend(backend: str, local_rank: int) -> tuple[str, object]:
    """`backend`, or the strict stand-in for it where `$ALIGNFLOW_STRICT_GROUPS` asks
    (tests, simulated clusters: gloo carries the data, NCCL's refusals apply)."""
    if not strict.enabled():
        return backend, None
    strict.register()
    return strict.BACKEND, strict.Emulated.for_rank(backend, local_rank)


def ensure_group(backend: Backend | None = None) -> None:
    """Join torchrun's group (its variables are set) or a world of one; no-op when joined."""
    if dist.is_initialized():
        return
    backend = backend or default_backend()
    if all(v in os.environ for v in TORCHRUN_VARS):
        os.environ.setdefault("LOCAL_RANK", "0")
        name, options = _backend(backend, int(os.environ["LOCAL_RANK"]))
        dist.init_process_group(name, init_method="env://", pg_options=options)
        _leave_at_exit()
        return
    join(GroupSpec(rank=0, world_size=1, master_addr="127.0.0.1", master_port=free_port(),
                   backend=backend))


# What `join` found in the rank variables it set: `leave` puts it back, so a process that
# left its group (and the processes it starts) no longer looks like a torchrun rank.
_JOIN_ENV_BEFORE: dict[str, str | None] = {}


def leave() -> None:
    """Destroy the default process group (so the process may join another)."""
    if dist.is_initialized():
        _destroy_groups()
    for key, value in _JOIN_ENV_BEFORE.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    _JOIN_ENV_BEFORE.clear()


def rank_and_size() -> tuple[int, int]:
    """(rank, world size); (0, 1) outside any group."""
    if not dist.is_initialized():
        return 0, 1
    return dist.get_rank(), dist.get_world_size()
