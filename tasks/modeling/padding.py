"""Token-id lists → padded or packed tensors for the forward passes in this package."""

from __future__ import annotations

import torch


def left_pad(seqs: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask), both (B, T) int64, padding on the left (for generation)."""
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for i, s in enumerate(seqs):
        if s:
            ids[i, width - len(s):] = torch.as_tensor(s, dtype=torch.long)
            mask[i, width - len(s):] = 1
    return ids, mask


def pack(seqs: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids (1, N), position_ids (1, N), cu_seqlens (B+1,) int32): no padding at all.

    Positions restart at 0 for each sequence; transformers reads those restarts as sequence
    boundaries (see `modeling.logprobs.packed_sequence_logprobs`).
    """
    lengths = torch.tensor([len(s) for s in seqs], dtype=torch.int32)
    assert bool((lengths > 0).all()), "pack: empty sequence"
    ids = torch.cat([torch.as_tensor(s, dtype=torch.long) for s in seqs])[None]
    pos = torch.cat([torch.arange(n, dtype=torch.long) for n in lengths.tolist()])[None]
    cu = torch.zeros(len(seqs) + 1, dtype=torch.int32)
    cu[1:] = lengths.cumsum(0)
    return ids, pos, cu
