"""Weight buckets: many named tensors packed into one flat byte buffer per transfer.

A weight sync sends a few large messages instead of one per tensor (a 135M model has ~270
tensors; a 7B one ~300 much larger ones): every RPC or Ray call has a fixed cost, and one
contiguous buffer crosses a process boundary without per-tensor framing. A bucket is plain
data (lists of names, dtype names, shapes, offsets, and a uint8 tensor), so any transport —
vLLM's `collective_rpc`, a Ray object, a torch.distributed broadcast — can carry it.
Pure torch: importable without vLLM or Ray.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

import torch

from alignflow.errors import ConfigError

ALIGN = 64  # byte alignment of each tensor in the buffer, so dtype views are legal


@dataclass(frozen=True)
class WeightBucket:
    """Tensors `names[i]` live at `buffer[offsets[i]:]` with `dtypes[i]` and `shapes[i]`."""

    names: list[str]
    dtypes: list[str]
    shapes: list[list[int]]
    offsets: list[int]
    buffer: torch.Tensor  # uint8, 1-D

    def as_args(self) -> tuple:
        """The bucket as plain positional arguments (msgpack/RPC friendly)."""
        return self.names, self.dtypes, self.shapes, self.offsets, self.buffer

    def unpack(self) -> list[tuple[str, torch.Tensor]]:
        """Views into the buffer, no copies; they stay valid while the buffer lives."""
        return unpack(*self.as_args())


def unpack(names: list[str], dtypes: list[str], shapes: list[list[int]], offsets: list[int],
           buffer: torch.Tensor) -> list[tuple[str, torch.Tensor]]:
    """Inverse of `pack_buckets` for one bucket given as plain arguments."""
    out = []
    for name, dtype_name, shape, offset in zip(names, dtypes, shapes, offsets, strict=True):
        dtype = getattr(torch, dtype_name)
        numel = 1
        for dim in shape:
            numel *= dim
        nbytes = numel * dtype.itemsize
        out.append((name, buffer[offset : offset + nbytes].view(dtype).view(shape)))
    return out


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


Alloc = Callable[[int, torch.device | str], torch.Tensor]


def empty(nbytes: int, device: torch.device | str) -> torch.Tensor:
    return torch.empty(nbytes, dtype=torch.uint8, device=device)


def pack_buckets(named_tensors: Iterable[tuple[str, torch.Tensor]], bucket_bytes: int, *,
                 device: torch.device | str = "cpu", alloc: Alloc = empty
                 ) -> Iterator[WeightBucket]:
    """Groups tensors in order into buckets of at most `bucket_bytes` (a tensor larger than
    that gets a bucket of its own). Each tensor is copied once, into its bucket's buffer
    on `device` (the GPU for an NCCL broadcast), made by `alloc` (`vllm_ipc.shareable`: one
    another process maps)."""
    if bucket_bytes < 1:
        raise ConfigError(f"sync bucket_bytes={bucket_bytes}: expected an integer >= 1")
    pending: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, tensor in named_tensors:
        nbytes = _aligned(tensor.numel() * tensor.element_size())
        if pending and size + nbytes > bucket_bytes:
            yield _fill(pending, size, device, alloc)
            pending, size = [], 0
        pending.append((name, tensor))
        size += nbytes
    if pending:
        yield _fill(pending, size, device, alloc)


def _fill(pending: list[tuple[str, torch.Tensor]], size: int, device: torch.device | str,
          alloc: Alloc) -> WeightBucket:
    buffer = alloc(size, device)
    names, dtypes, shapes, offsets = [], [], [], []
    offset = 0
    for name, tensor in pending:
        flat = tensor.detach().to(device).contiguous().reshape(-1).view(torch.uint8)
        buffer[offset : offset + flat.numel()].copy_(flat)
        names.append(name)
        dtypes.append(str(tensor.dtype).removeprefix("torch."))
        shapes.append(list(tensor.shape))
        offsets.append(offset)
        offset += _aligned(flat.numel())
    return WeightBucket(names, dtypes, shapes, offsets, buffer)
