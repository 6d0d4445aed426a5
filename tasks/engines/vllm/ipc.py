"""A colocated weight sync by handle: the engine maps the trainer's bucket, no bytes cross.

An engine that shares its GPU with the trainer rank that syncs it (a per-rank hybrid engine,
OpenRLHF's colocate_all) but runs its worker in another process (`mp`: vLLM's worker in a
trainer rank, `vllm_process`) used to get each bucket pickled through `collective_rpc`: GPU
→ host → GPU on every iteration. Here the bucket is packed on the trainer's device and the
worker is sent a handle to it: a CUDA IPC handle on a GPU (`reduce_tensor`, as OpenRLHF's
colocated sync), the name of a shared-memory file on the CPU (torch's `file_system`
sharing: a name, not the bytes). The worker maps the buffer on its own device, loads it
(the layerwise load of `vllm_worker`), waits for the copies and answers; only then does the
sender drop the bucket, so the sync's extra memory stays one bucket + the largest tensor.

Handles are keyed by device (a GPU's UUID, "cpu"): a process may see the GPU under another
index than the trainer (its own CUDA_VISIBLE_DEVICES), so a worker takes the handle made on
its GPU and opens it at its own index (the device argument of torch's `rebuild_cuda_tensor`
rewritten, as OpenRLHF's worker does). A worker with no handle for its device is refused in
one line.

Hybrid engines of tensor parallel > 1 (engine actors pinned to the GPUs of trainer ranks
i*TP..(i+1)*TP-1) are synced by handle too (`vllm_ipc_group`): every rank packs each bucket
on its own GPU and shares it, the handles are gathered to rank 0 (which drives the engines),
and engine i is sent the handles of its ranks (`merged`); each of its workers opens the one
of its own GPU. On the CPU (the simulated cluster's stand-in) the handles of an engine's
ranks are all "cpu": `merged` keys them "cpu#<tensor-parallel rank>" and a worker opens its
rank's.

Modes (`SyncMode`): "ref" — the worker is in this process (`uni`): the bucket is handed over
by reference; "ipc" — another process on this device: a handle; "bytes" — elsewhere: the
bucket's bytes. Pure torch; imported by the engine and by its workers.
"""

from __future__ import annotations

import inspect
import pickle
from typing import Literal

import torch

from alignflow.tasks.engines.vllm.weights import WeightBucket

SyncMode = Literal["ref", "ipc", "bytes"]
STAGE = "alignflow_stage_bucket"  # the worker's method for a bucket given by value/reference
STAGE_SHARED = "alignflow_stage_shared"  # ... for a bucket given by handle


def mode_for(executor: str, tensor_parallel_size: int) -> tuple[SyncMode, str]:
    """How an engine in the trainer's process is synced, and why: its worker in this process
    ("ref"), in another on this device ("ipc"), else bytes."""
    if executor == "uni":
        return "ref", "the engine's worker runs in the trainer's process: buckets by reference"
    if tensor_parallel_size == 1:
        return "ipc", ("the engine's worker is a process of its own on its trainer rank's "
                       "device: buckets by handle, CUDA IPC on a GPU, shared memory on the CPU")
    return "bytes", (f"the engine's {tensor_parallel_size} tensor-parallel workers are "
                     "processes on GPUs of their own, not all this process's: buckets pickled")


HYBRID_ACTORS_WHY = (
    "hybrid engines in Ray actors on the GPUs of trainer ranks i*TP..(i+1)*TP-1: every rank "
    "packs each bucket on its GPU, rank 0 gathers the handles and sends each engine its "
    "ranks'; each tensor-parallel worker opens the one of its GPU")


def planned_mode(*, in_host: bool, ranks: int, tensor_parallel_size: int, hybrid: bool,
                 transport: str) -> tuple[str, str]:
    """The plan's line on how weights reach its engines (mode, why): an engine in the
    trainer's process as `VLLMEngine` picks (its worker in another process when the host
    has several ranks: `vllm_process`), engine actors by their transport."""
    if in_host:
        executor = "uni" if tensor_parallel_size == 1 and ranks == 1 else "mp"
        mode, why = mode_for(executor, tensor_parallel_size)
        return {"ipc": "cuda-ipc", "ref": "in place"}.get(mode, mode), why
    if hybrid:
        return "cuda-ipc", HYBRID_ACTORS_WHY
    return transport, "engines on GPUs of their own: buckets " + (
        "through Ray's object store" if transport == "ray" else f"broadcast over {transport}")


def device_key(device: torch.device) -> str:
    """The device as every process on the node names it (a GPU by UUID, not by index)."""
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_properties(device).uuid}"
    return device.type


def shareable(nbytes: int, device: torch.device | str) -> torch.Tensor:
    """An empty uint8 buffer another process can map: in a shared-memory file on the CPU
    (no copy at `share`), from the caching allocator on a GPU (IPC works on its blocks)."""
    device = torch.device(device)
    if device.type != "cpu":
        return torch.empty(nbytes, dtype=torch.uint8, device=device)
    storage = torch.UntypedStorage._new_using_filename_cpu(nbytes)
    return torch.empty(0, dtype=torch.uint8).set_(storage, 0, (nbytes,), (1,))


def share(buffer: torch.Tensor) -> dict[str, tuple]:
    """{device key: handle} of `buffer` (1-D, uint8): plain data, a few hundred bytes. The
    caller keeps `buffer` alive until every process that opened the handle answered."""
    if buffer.device.type == "cuda":
        from torch.multiprocessing.reductions import reduce_tensor

        _, args = reduce_tensor(buffer.detach())
        return {device_key(buffer.device): ("cuda", args)}
    if buffer.device.type != "cpu":
        raise ValueError(f"ipc.share: a buffer on {buffer.device}; expected cuda or cpu")
    storage = buffer.untyped_storage()
    manager, name, size = storage._share_filename_cpu_()  # in place (a copy unless `shareable`)
    offset = buffer.storage_offset() * buffer.element_size()
    return {"cpu": ("cpu", (manager, name, size, offset, buffer.numel()))}


def _device_arg() -> int:
    from torch.multiprocessing.reductions import rebuild_cuda_tensor

    return list(inspect.signature(rebuild_cuda_tensor).parameters).index("storage_device")


def merged(per_rank: list[dict[str, tuple]]) -> dict[str, tuple]:
    """One engine's handles from those its tensor-parallel ranks made (in rank order): GPU
    handles keep their device key (each GPU's own); CPU ones, all "cpu", become
    "cpu#<tensor-parallel rank>"."""
    out: dict[str, tuple] = {}
    for rank, handles in enumerate(per_rank):
        for key, handle in handles.items():
            out[f"{key}#{rank}" if key == "cpu" else key] = handle
    return out


def opened(handles: dict[str, tuple], device: torch.device | None, rank: int = 0
           ) -> torch.Tensor:
    """The buffer a handle of `share` names, mapped on `device` (this process's index of the
    GPU; None: the CPU), or the one `merged` keyed for tensor-parallel `rank` there. Refused
    when no handle was made on this device."""
    device = torch.device("cpu") if device is None else torch.device(device)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    key = device_key(device)
    if key not in handles:
        key = f"{key}#{rank}"
    if key not in handles:
        raise RuntimeError(f"weight sync by handle: no handle for this worker's device {key} "
                           f"(handles for {sorted(handles)}); its sender is on another device")
    kind, args = handles[key]
    if kind == "cuda":
        from torch.multiprocessing.reductions import rebuild_cuda_tensor

        args = list(args)
        args[_device_arg()] = device.index  # the sender's index of this GPU is not ours
        return rebuild_cuda_tensor(*args)
    manager, name, size, offset, numel = args
    storage = torch.UntypedStorage._new_shared_filename_cpu(manager, name, size)
    return torch.empty(0, dtype=torch.uint8).set_(storage, offset, (numel,), (1,))


def done_with(buffer: torch.Tensor) -> None:
    """The worker's last step before it answers: the copies out of a mapped GPU buffer are
    finished (the sender frees it on the answer)."""
    if buffer.device.type == "cuda":
        torch.cuda.current_stream(buffer.device).synchronize()


def collect(mode: SyncMode, device: torch.device | str) -> None:
    """The sender, once a bucket shared by CUDA IPC is let go: torch keeps a freed block
    some process mapped (its "limbo") until told its users are done; they are (they
    answered), so it goes back to the allocator now, not at the next out-of-memory."""
    if mode == "ipc" and torch.device(device).type == "cuda":
        torch.cuda.ipc_collect()


def message(bucket: WeightBucket, mode: SyncMode) -> tuple[str, tuple]:
    """(the worker's method, its arguments) for one bucket: in "ipc" mode the buffer goes as
    `share`'s handles, else as itself (by reference in this process, pickled across). A
    bucket whose buffer is handles already (a hybrid engine's ranks': `merged`) goes as
    them, whatever the mode."""
    if isinstance(bucket.buffer, dict):
        return STAGE_SHARED, (*bucket.as_args()[:-1], dict(bucket.buffer))
    if mode == "ipc":
        meta = bucket.as_args()[:-1]
        return STAGE_SHARED, (*meta, share(bucket.buffer))
    return STAGE, bucket.as_args()


def wire_bytes(method_args: tuple[str, tuple]) -> int:
    """The bytes of one message as an RPC queue carries it (pickled, as vLLM's `mp`
    executor sends `collective_rpc`'s arguments)."""
    return len(pickle.dumps(method_args, protocol=pickle.HIGHEST_PROTOCOL))
