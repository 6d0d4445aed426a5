"""Weight sync to vLLM engines on their own devices: a broadcast from the trainer's process.

The trainer (rank 0) and every engine worker (ranks 1.., `tensor_parallel_size` per engine)
form a process group made only for the sync, beside any group either side already has.
On GPUs it is vLLM's own: a `StatelessProcessGroup` rendezvous and a `PyNcclCommunicator`
(`vllm.distributed.weight_transfer.nccl_common.stateless_init_process_group`, what vLLM
0.32 offers for trainer-to-worker transfers), which touches no torch.distributed global
state on either side. On CPU builds (no NCCL) it is a gloo group built directly on a TCP
store, listening on the node address Ray reports (or `GLOO_SOCKET_IFNAME`: `gloo_devices`);
on a simulated cluster (fake GPUs: `ALIGNFLOW_STRICT_GROUPS`) it is the strict stand-in for
NCCL (`tasks/distributed/strict.py`) on such a store, and the buffers it carries are placed
on the fake GPUs (`SyncGroup.buffer`). Each packed bucket (`vllm_weights`) is announced to
the engines (names, dtypes, shapes, offsets: a Ray call each), then its one flat buffer is
broadcast; the engines load what they received at once and process it all at the commit.
Every wait has the sync's timeout, so a dead engine fails the sync instead of hanging it,
and the group is then closed on every side that is left (`close`: NCCL's communicator
aborted, so no broadcast waits on the dead peer), to be formed anew with the restarted
engine at the next sync. NCCL finds its interface itself (`NCCL_SOCKET_IFNAME` wins).

Pure torch (plus Ray on the trainer's side, vLLM for NCCL; imported when used).
"""

from __future__ import annotations

import contextlib
import datetime
import os
import socket
from collections.abc import Callable

import torch

from alignflow.errors import EngineError
from alignflow.tasks.distributed import strict
from alignflow.tasks.modeling import device

Wait = Callable[[dict, float, str], list]


class SyncGroup:
    """One member of the sync group; rank 0 (the trainer) broadcasts."""

    def __init__(self, backend: str, host: str, port: int, rank: int, world: int,
                 timeout_s: float, *, store=None) -> None:
        self.backend, self.rank = backend, rank
        self.timeout = datetime.timedelta(seconds=timeout_s)
        self.comm = self.group = None
        if strict.enabled():  # simulated clusters, tests: NCCL's refusals, on gloo
            store = dist_prefix(store or _client_store(host, port, world, timeout_s))
            self.group = strict.group_on(store, rank, world, self.timeout,
                                         strict.Emulated.for_rank(backend))
        elif backend == "nccl":
            from vllm.distributed.weight_transfer.nccl_common import (
                stateless_init_process_group,
            )

            self.comm = stateless_init_process_group(host, port, rank, world,
                                                     device=torch.cuda.current_device())
        elif backend == "gloo":
            self.group = _gloo(store or _client_store(host, port, world, timeout_s), rank,
                               world, self.timeout)
        else:
            raise ValueError(f"sync backend {backend!r}: expected 'nccl' or 'gloo'")

    @property
    def device(self) -> torch.device:
        """Where the group's buffers live: the rank's GPU for NCCL (the CPU standing for a
        fake one on a simulated cluster), else the CPU."""
        return device.rank_device() if self.backend == "nccl" else torch.device("cpu")

    def buffer(self, nbytes: int) -> torch.Tensor:
        """An empty bucket buffer on the group's device, for a broadcast to land in."""
        return self.on_device(torch.empty(nbytes, dtype=torch.uint8, device=self.device))

    def on_device(self, buffer: torch.Tensor) -> torch.Tensor:
        """`buffer` (packed on `device`) as the group carries it: marked as on a fake GPU."""
        return device.place(buffer, self.device) if self.backend == "nccl" else buffer

    def broadcast(self, buffer: torch.Tensor) -> None:
        if self.comm is not None:
            self.comm.broadcast(buffer, src=0)
        elif self.group is not None:
            self.group.broadcast([buffer], _root0(self.timeout)).wait()
        else:
            raise EngineError("the weight-sync group was closed; it is formed again at the "
                              "next sync")

    def close(self) -> None:
        """Leave the group for good (a peer died or the engines restart): NCCL's
        communicator is aborted, gloo's connections shut."""
        comm, group, self.comm, self.group = self.comm, self.group, None, None
        if comm is not None:
            comm.destroy()
        if group is not None:
            with contextlib.suppress(RuntimeError, AttributeError):  # (a strict stand-in)
                group.abort()


def _client_store(host: str, port: int, world: int, timeout_s: float):
    import torch.distributed as dist

    return dist.TCPStore(host, port, world, is_master=False,
                         timeout=datetime.timedelta(seconds=timeout_s))


def dist_prefix(store):
    """The sync group's keys on `store`, apart from any other group's."""
    import torch.distributed as dist

    return dist.PrefixStore("alignflow-weight-sync", store)


def _gloo(store, rank: int, world: int, timeout: datetime.timedelta):
    import torch.distributed as dist

    options = dist.ProcessGroupGloo._Options()
    options._timeout, options._devices = timeout, gloo_devices()
    return dist.ProcessGroupGloo(dist_prefix(store), rank, world, options)


def gloo_devices() -> list:
    """Where this rank's gloo connections listen: the interfaces the user names in
    `GLOO_SOCKET_IFNAME` (they win), else this node's address as Ray reports it (the one
    the other nodes reach). Left to itself gloo binds to what the host name resolves to,
    127.0.1.1 on many distributions, and a peer on another node waits on it until the
    sync times out."""
    import torch.distributed as dist

    gloo = dist.ProcessGroupGloo
    named = [name for name in os.environ.get("GLOO_SOCKET_IFNAME", "").split(",") if name]
    if named:
        return [gloo.create_device(interface=name) for name in named]
    address = node_address()
    return [gloo.create_device(hostname=address) if address else gloo.create_default_device()]


def node_address() -> str | None:
    """This node's IP as Ray reports it (None outside Ray)."""
    try:
        import ray
    except ImportError:
        return None
    return ray.util.get_node_ip_address() if ray.is_initialized() else None


def _root0(timeout: datetime.timedelta):
    import torch.distributed as dist

    opts = dist.BroadcastOptions()
    opts.rootRank, opts.timeout = 0, timeout
    return opts


class BroadcastSender:
    """The trainer's side of a sync group over engine actors (rank 0)."""

    def __init__(self, backend: str, *, timeout_s: float) -> None:
        self.backend = backend
        self.timeout_s = timeout_s
        self.group: SyncGroup | None = None
        self.members: tuple[int, ...] = ()  # the engines (by index) that joined

    def connect(self, actors: dict[int, object], wait: Wait, tensor_parallel_size: int) -> None:
        """Has every worker of the engines `actors` ({index: actor}) join a group on this
        node's address, joins as rank 0."""
        import ray

        world = 1 + tensor_parallel_size * len(actors)
        host = ray.util.get_node_ip_address()
        store, port = self._rendezvous(host, world)
        calls = {i: actor.join_sync_group.remote(host, port, 1 + k * tensor_parallel_size,
                                                  world, self.backend, self.timeout_s)
                 for k, (i, actor) in enumerate(actors.items())}
        self.members = tuple(actors)
        try:
            self.group = SyncGroup(self.backend, host, port, 0, world, self.timeout_s,
                                   store=store)
        except Exception as exc:
            wait(calls, 1.0, "sync group")  # names the engines that died, restarts them
            raise EngineError(f"vLLM weight-sync group ({self.backend}, {world} ranks) did not "
                              f"form: {exc}") from exc
        wait(calls, self.timeout_s, "sync group")

    def _rendezvous(self, host: str, world: int) -> tuple[object | None, int]:
        """gloo (and the strict stand-in for NCCL): the store this side serves; NCCL: a free
        port vLLM's rendezvous binds."""
        if self.backend == "nccl" and not strict.enabled():
            with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
                sock.bind((host, 0))  # a port nobody listens on now; vLLM's store binds it
                return None, sock.getsockname()[1]
        import torch.distributed as dist

        store = dist.TCPStore(host, 0, world, is_master=True, wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=self.timeout_s))
        return store, store.port

    def close(self) -> None:
        """This side leaves the group (an engine died or restarts: see `SyncGroup.close`)."""
        group, self.group = self.group, None
        if group is not None:
            group.close()

    def send(self, bucket, actors: dict[int, object], wait: Wait) -> None:
        """Announces `bucket` to every engine of the group ({index: actor}), then
        broadcasts its buffer."""
        assert self.group is not None, "connect() first"
        meta = (bucket.names, bucket.dtypes, bucket.shapes, bucket.offsets,
                int(bucket.buffer.numel()))
        calls = {i: actor.receive_bucket.remote(*meta) for i, actor in actors.items()}
        try:
            self.group.broadcast(self.group.on_device(bucket.buffer))
        except Exception as exc:
            with contextlib.suppress(Exception):  # the receivers' side of the same failure
                wait(calls, 1.0, "sync")
            raise EngineError(f"vLLM weight broadcast ({self.backend}) failed: {exc}") from exc
        wait(calls, self.timeout_s, "sync")
