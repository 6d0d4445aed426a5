"""A gloo-backed stand-in for NCCL that refuses what NCCL refuses (tests, simulated clusters).

On a CPU machine gloo carries whatever it is given, so code that dies at its first
collective on GPUs (a CPU tensor on an NCCL-only group; two ranks on one GPU) passes every
CPU test. The `strict` backend carries the data over gloo, but first applies NCCL's rules
for the group the code *would* have on GPUs (`Emulated`: its backend spec, the rank's
device and node):

- a tensor on a device type the emulated group has no backend for is refused with
  torch's own words ("No backend type associated with device type cpu": a CPU tensor on
  an NCCL-only group); a CUDA tensor must be on the rank's device;
- two ranks of one group on one device are refused when the group forms (NCCL: "Duplicate
  GPU detected");
- a collective on a group the rank is not in is refused (torch only warns and skips it,
  and the group's members wait for this rank forever).

With fake GPUs (a CPU machine whose Ray advertises GPUs) "the rank's device" cannot be a
tensor's device; it is declared: `Emulated(device="cuda:3", node=...)`, so the duplicate
check sees the GPU Ray assigned. Object collectives (`all_gather_object`, ...) travel on
the CPU here (NCCL would put them on the current GPU): on an NCCL-only stand-in they are
refused like any CPU tensor.

Use: `register()` once per process, then `init_process_group("strict", pg_options=
Emulated(...))` (or `tasks.distributed.group.join` with `$ALIGNFLOW_STRICT_GROUPS=1`).
"""

from __future__ import annotations

import datetime
import os
import socket
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch.distributed import distributed_c10d as c10d

from alignflow.tasks.simulate import node

BACKEND = "strict"
ENV = "ALIGNFLOW_STRICT_GROUPS"  # "1": group.join forms strict groups (simulated clusters)
GPU_BACKENDS = {"nccl": "cuda", "gloo": "cpu,cuda"}
# every ProcessGroup method that carries tensors; each is checked, then run by gloo
COLLECTIVES = ("allreduce", "allreduce_coalesced", "broadcast", "reduce", "allgather",
               "allgather_coalesced", "allgather_into_tensor_coalesced", "_allgather_base",
               "all_gather_single", "all_gather_single_coalesced", "reduce_scatter",
               "_reduce_scatter_base", "reduce_scatter_single",
               "reduce_scatter_single_coalesced", "reduce_scatter_tensor_coalesced", "gather",
               "scatter", "alltoall", "alltoall_base", "all_to_all_single", "send", "recv",
               "recv_anysource")


@dataclass(frozen=True, kw_only=True)
class Emulated:
    """The group a rank would have on GPUs: `backend` as given to `init_process_group`
    ("nccl", "gloo", "cpu:gloo,cuda:nccl"), the rank's device ("cuda:<i>", real or fake,
    or "cpu") and its node (two ranks on one node and CUDA device are refused)."""

    backend: str = "nccl"
    device: str = "cuda:0"
    node: str = "node-0"

    @property
    def device_types(self) -> frozenset[str]:
        """The device types the emulated group has a backend for."""
        if ":" in self.backend:
            return frozenset(pair.split(":")[0].strip() for pair in self.backend.split(","))
        return frozenset(GPU_BACKENDS.get(self.backend, "cpu").split(","))

    @classmethod
    def for_rank(cls, backend: str, local_rank: int = 0) -> Emulated:
        """This process as a rank of a `backend` group: its GPU as Ray assigned it (fake or
        real; fractional GPUs share one), else `CUDA_VISIBLE_DEVICES`[local rank]; its node
        as Ray names it, else the host name."""
        if "nccl" not in backend:
            return cls(backend=backend, device="cpu", node=_node())
        return cls(backend=backend, device=f"cuda:{_physical_gpu(local_rank)}", node=_node())

    @property
    def uses_nccl(self) -> bool:
        return "nccl" in self.backend

    def check(self, tensor: torch.Tensor, op: str) -> None:
        """Refuse `tensor` where the emulated group would (a tensor placed on a fake GPU
        counts as on that GPU: `tasks/simulate/node.py`)."""
        where = node.device_of(tensor)
        kind = where.type
        if kind not in self.device_types:
            raise RuntimeError(f"No backend type associated with device type {kind} (strict "
                               f"group standing in for {self.backend!r}, in {op}: put the "
                               f"tensor on the rank's device {self.device} or use a group "
                               "with a backend for it)")
        if kind == "cuda" and where != torch.device(self.device):
            raise RuntimeError(f"{op}: tensor on {where}, but this rank's device is "
                               f"{self.device} (strict group standing in for "
                               f"{self.backend!r}; NCCL needs every tensor on the rank's GPU)")


def _ray_context():
    ray = sys.modules.get("ray")
    return ray if ray is not None and ray.is_initialized() else None


def _node() -> str:
    ray = _ray_context()
    return ray.get_runtime_context().get_node_id() if ray else socket.gethostname()


def _physical_gpu(local_rank: int) -> str:
    ray = _ray_context()
    ids = ray.get_gpu_ids() if ray else []
    if ids:
        return str(ids[0])
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
               if v.strip()]
    return visible[local_rank] if local_rank < len(visible) else str(local_rank)


def _tensors(value) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for item in value for t in _tensors(item)]
    return []


def _checked(name: str):
    def call(self: StrictGroup, *args):
        for tensor in _tensors(args):
            self.emulated.check(tensor, name)
        if name == "allreduce" and args[1:] and args[1].reduceOp == dist.ReduceOp.AVG:
            return self._average(args[0], args[1])
        return getattr(self.inner, name)(*args)
    call.__name__ = name
    return call


class StrictGroup(dist.ProcessGroup):
    """One rank's group: NCCL's checks (`Emulated`), then a real gloo group does the work."""

    def __init__(self, inner: dist.ProcessGroup, emulated: Emulated) -> None:
        super().__init__(inner.rank(), inner.size())
        self.inner, self.emulated = inner, emulated

    @property
    def _device_types(self) -> list[torch.device]:
        return [torch.device("cpu")]  # object collectives and barriers run on the CPU here

    def barrier(self, opts=None):
        return self.inner.barrier(opts) if opts is not None else self.inner.barrier()

    def _average(self, tensors: list[torch.Tensor], opts):
        """NCCL averages; gloo cannot (ReduceOp.AVG): a sum over the ranks, divided."""
        summed = dist.AllreduceOptions()
        summed.reduceOp = dist.ReduceOp.SUM
        work = self.inner.allreduce(tensors, summed)
        work.wait()
        for tensor in tensors:
            tensor.div_(self.size())
        return work

    def getBackendName(self) -> str:
        return BACKEND

    def __repr__(self) -> str:
        return f"StrictGroup(rank {self.rank()} of {self.size()}, as {self.emulated})"


for _name in COLLECTIVES:
    setattr(StrictGroup, _name, _checked(_name))


def _gloo_group(store, rank: int, size: int, timeout: datetime.timedelta) -> dist.ProcessGroup:
    """A plain ProcessGroup whose only backend is gloo, on its own keys of `store`."""
    prefixed = dist.PrefixStore("strict-gloo/", store)
    backend = dist.ProcessGroupGloo(prefixed, rank, size, timeout)
    group = dist.ProcessGroup(prefixed, rank, size)
    group._set_default_backend(dist.ProcessGroup.BackendType.GLOO)
    group._register_backend(torch.device("cpu"), dist.ProcessGroup.BackendType.GLOO, backend)
    return group


def _refuse_shared_devices(store, rank: int, size: int, emulated: Emulated) -> None:
    """NCCL's "Duplicate GPU detected": every rank publishes its (node, device), all compare."""
    store.set(f"strict-device/{rank}", f"{emulated.node}|{emulated.device}")
    seen = [store.get(f"strict-device/{r}").decode() for r in range(size)]
    if not emulated.uses_nccl or not emulated.device.startswith("cuda"):
        return
    mine = seen[rank]
    shared = [r for r, where in enumerate(seen) if where == mine]
    if len(shared) > 1:
        node, device = mine.split("|")
        raise RuntimeError(f"Duplicate GPU detected: ranks {shared} of one group are all on "
                           f"{device} of node {node} (strict group standing in for "
                           f"{emulated.backend!r}; NCCL needs one GPU per rank)")


def _create(opts, emulated) -> StrictGroup:
    """torch's hook: `emulated` is `pg_options`; a sub-group inherits the world's."""
    if not isinstance(emulated, Emulated):
        world = c10d.GroupMember.WORLD
        emulated = world.emulated if isinstance(world, StrictGroup) else declared()
    return group_on(opts.store, opts.group_rank, opts.group_size, opts.timeout, emulated)


def group_on(store, rank: int, size: int, timeout: datetime.timedelta,
             emulated: Emulated) -> StrictGroup:
    """A strict group on `store` built directly (a group beside the default one, e.g. the
    weight-sync group of vLLM engines, `tasks/engines/vllm/broadcast.py`)."""
    _refuse_shared_devices(store, rank, size, emulated)
    return StrictGroup(_gloo_group(store, rank, size, timeout), emulated)


_DECLARED: list[Emulated] = []


def declare(emulated: Emulated) -> None:
    """What this process's strict groups stand in for when `pg_options` does not say."""
    _DECLARED[:] = [emulated]


def declared() -> Emulated:
    return _DECLARED[0] if _DECLARED else Emulated()


def _refuse_not_in_group(op_name) -> None:
    rank = -1 if c10d.GroupMember.WORLD is None else c10d.GroupMember.WORLD.rank()
    raise RuntimeError(f"{op_name} on global rank {rank}, which is not in the given group "
                       "(strict group: torch would skip it while the group's ranks wait)")


def register() -> None:
    """Make the `strict` backend known to torch.distributed (idempotent), and refuse
    collectives on a group this rank is not in."""
    if BACKEND.upper() not in dist.Backend._plugins:
        dist.Backend.register_backend(BACKEND, _create, extended_api=True,
                                      devices=["cpu", "cuda"])
    c10d._warn_not_in_group = _refuse_not_in_group


def enabled() -> bool:
    """Whether `$ALIGNFLOW_STRICT_GROUPS` asks for strict groups in this process."""
    return os.environ.get(ENV, "") not in ("", "0")
