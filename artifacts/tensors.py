"""Committed Arrow list columns (token ids) → torch batches, padded or packed.

Works on the Arrow buffers directly (values + offsets), so a batch of thousands of
sequences turns into a tensor without a Python loop over tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal, TypeAlias

import numpy as np
import pyarrow as pa
import torch

Seqs: TypeAlias = "pa.Array | pa.ChunkedArray | Sequence[Sequence[int]]"


def _flat(seqs: Seqs) -> tuple[np.ndarray, np.ndarray]:
    """(values int64, offsets int64 of length B+1) of a list column or list of lists."""
    if isinstance(seqs, pa.ChunkedArray):
        seqs = seqs.combine_chunks()
    if not isinstance(seqs, pa.Array):
        seqs = pa.array(seqs, pa.list_(pa.int64()))
    if seqs.null_count:
        raise ValueError(f"{seqs.null_count} null sequence(s); expected token id lists")
    offsets = seqs.offsets.to_numpy().astype(np.int64)
    values = seqs.flatten().to_numpy(zero_copy_only=False).astype(np.int64)
    return values, offsets - offsets[0]


def pad(seqs: Seqs, pad_id: int, side: Literal["left", "right"] = "right",
        ) -> tuple[torch.Tensor, torch.Tensor]:
    """(ids [B, T], attention_mask [B, T]) with T the longest length; pads on `side`."""
    if side not in ("left", "right"):
        raise ValueError(f"side={side!r}; expected 'left' or 'right'")
    values, offsets = _flat(seqs)
    lens = np.diff(offsets)
    b, t = len(lens), int(lens.max(initial=0))
    ids: np.ndarray = np.full((b, t), pad_id, dtype=np.int64)
    mask: np.ndarray = np.zeros((b, t), dtype=np.int64)
    row: np.ndarray = np.repeat(np.arange(b), lens)
    pos = np.arange(len(values)) - np.repeat(offsets[:-1], lens)
    if side == "left":
        pos = pos + np.repeat(t - lens, lens)
    ids[row, pos] = values
    mask[row, pos] = 1
    return torch.from_numpy(ids), torch.from_numpy(mask)


def pad_left(seqs: Seqs, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left padding: what decoder-only generation wants."""
    return pad(seqs, pad_id, "left")


def pad_right(seqs: Seqs, pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Right padding: what training on prompt+response wants."""
    return pad(seqs, pad_id, "right")


def pack(seqs: Seqs) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Concatenate sequences into one row: (input_ids [1, T], position_ids [1, T] restarting
    at 0 per sequence, cu_seqlens int32 [B+1]) as varlen attention kernels expect."""
    values, offsets = _flat(seqs)
    lens = np.diff(offsets)
    positions = np.arange(len(values)) - np.repeat(offsets[:-1], lens)
    return (torch.from_numpy(values).unsqueeze(0), torch.from_numpy(positions).unsqueeze(0),
            torch.from_numpy(offsets.astype(np.int32)))
