"""Weight sync to vLLM engines on their own devices: a broadcast from the trainer's process.

The trainer (rank 0) and every engine worker (ranks 1.., `tensor_parallel_size` per engine)
form a process group made only for the sync, beside any group the trainer already has
(the c10d process group classes are built directly on a TCP store: no global state). Each
packed bucket (`vllm_weights`) is announced to the engines (names, dtypes, shapes,
offsets: a Ray call each), then its one flat buffer is broadcast; the engines stage what
they received and load it all at the commit. NCCL on GPUs; gloo on CPU builds. Every wait
has the sync's timeout, so a dead engine fails the sync instead of hanging it.

Pure torch (plus Ray on the trainer's side, imported when used).
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

import torch

from alignflow.errors import EngineError
from alignflow.tasks.distributed import strict
from alignflow.tasks.modeling import device

Wait = Callable[[dict, float, str], list]


class SyncGroup:
    """One member of the sync process group; rank 0 (the trainer) broadcasts."""

    def __init__(self, backend: str, store, rank: int, world: int, timeout_s: float) -> None:
        import torch.distributed as dist

        self.timeout = datetime.timedelta(seconds=timeout_s)
        self.store = store  # the group needs its store alive
        prefixed = dist.PrefixStore("alignflow-weight-sync", store)
        if strict.enabled():  # simulated clusters, tests: NCCL's refusals on gloo
            self.group = strict.group_on(prefixed, rank, world, self.timeout,
                                         strict.Emulated.for_rank(backend))
        elif backend == "gloo":
            self.group = dist.ProcessGroupGloo(prefixed, rank, world, self.timeout)
        elif backend == "nccl":
            options = dist.ProcessGroupNCCL.Options()
            options._timeout = self.timeout
            self.group = dist.ProcessGroupNCCL(prefixed, rank, world, options)
        else:
            raise ValueError(f"sync backend {backend!r}: expected 'nccl' or 'gloo'")
        self.backend = backend

    @classmethod
    def join(cls, backend: str, host: str, port: int, rank: int, world: int,
             timeout_s: float) -> SyncGroup:
        """An engine worker's side: connect to the trainer's store and join."""
        import torch.distributed as dist

        store = dist.TCPStore(host, port, world, is_master=False,
                              timeout=datetime.timedelta(seconds=timeout_s))
        return cls(backend, store, rank, world, timeout_s)

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
        self.group.broadcast(buffer, 0, self.timeout).wait()


class BroadcastSender:
    """The trainer's side of a sync group over engine actors (rank 0)."""

    def __init__(self, backend: str, *, timeout_s: float) -> None:
        self.backend = backend
        self.timeout_s = timeout_s
        self.group: SyncGroup | None = None

    def connect(self, actors: list, wait: Wait, tensor_parallel_size: int) -> None:
        """Opens a store on this node, has every engine worker join, joins as rank 0."""
        import ray
        import torch.distributed as dist

        world = 1 + tensor_parallel_size * len(actors)
        host = ray.util.get_node_ip_address()
        store = dist.TCPStore(host, 0, world, is_master=True, wait_for_workers=False,
                              timeout=datetime.timedelta(seconds=self.timeout_s))
        calls = {i: actor.join_sync_group.remote(host, store.port, 1 + i * tensor_parallel_size,
                                                  world, self.backend, self.timeout_s)
                 for i, actor in enumerate(actors)}
        try:
            self.group = SyncGroup(self.backend, store, 0, world, self.timeout_s)
        except Exception as exc:
            wait(calls, 1.0, "sync group")  # names the engines that died, restarts them
            raise EngineError(f"vLLM weight-sync group ({self.backend}, {world} ranks) did not "
                              f"form: {exc}") from exc
        wait(calls, self.timeout_s, "sync group")

    def send(self, bucket, actors: list, wait: Wait) -> None:
        """Announces `bucket` to every engine, then broadcasts its buffer."""
        assert self.group is not None, "connect() first"
        meta = (bucket.names, bucket.dtypes, bucket.shapes, bucket.offsets,
                int(bucket.buffer.numel()))
        calls = {i: actor.receive_bucket.remote(*meta) for i, actor in enumerate(actors)}
        try:
            self.group.broadcast(self.group.on_device(bucket.buffer))
        except Exception as exc:
            wait(calls, 1.0, "sync")
            raise EngineError(f"vLLM weight broadcast ({self.backend}) failed: {exc}") from exc
        wait(calls, self.timeout_s, "sync")
