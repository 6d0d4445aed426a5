"""Rollout rows → model inputs: packed sequences or padded `[prompt | response]` batches."""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import torch

from alignflow.artifacts.tensors import pad_left, pad_right


def chunks(n: int, size: int) -> Iterator[range]:
    """Consecutive index ranges of at most `size` covering `range(n)`."""
    for start in range(0, n, size):
        yield range(start, min(start + size, n))


def first_fit(idx: list[int], lengths: list[int], budget: int) -> list[list[int]]:
    """`idx` in bins of at most `budget` tokens (`lengths[i]` each), each sample into the
    first bin with room (OpenRLHF's `get_minimum_num_micro_batch_size`); a sample longer
    than the budget fills a bin of its own. Deterministic; bins keep `idx` order."""
    bins: list[list[int]] = []
    used: list[int] = []
    for i in idx:
        n = lengths[i]
        for b, total in enumerate(used):
            if total + n <= budget:
                bins[b].append(i)
                used[b] += n
                break
        else:
            bins.append([i])
            used.append(n)
    return bins


def inference_chunks(prompts: Sequence[list[int]], responses: Sequence[list[int]],
                     micro_batch: int, max_tokens: int | None = None) -> list[list[int]]:
    """Indices of forward-only micro-batches: `micro_batch` samples each, or as many as
    fit `max_tokens` prompt + response tokens (OpenRLHF's `rollout.max_tokens_per_gpu`)."""
    n = len(prompts)
    if max_tokens is None:
        return [list(r) for r in chunks(n, micro_batch)]
    return first_fit(list(range(n)), [len(p) + len(r) for p, r in zip(prompts, responses,
                                                                      strict=True)],
                     max_tokens)


def padded_pairs(prompt_ids: Sequence[list[int]], response_ids: Sequence[list[int]],
                 pad_id: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(input_ids, attention_mask, action_mask): prompts left-padded, responses right-padded.

    The last `R` columns are the response slots; `action_mask` (B, R) marks real tokens.
    """
    p_ids, p_mask = pad_left([list(p) for p in prompt_ids], pad_id)
    r_ids, r_mask = pad_right([list(r) for r in response_ids], pad_id)
    return (torch.cat([p_ids, r_ids], 1), torch.cat([p_mask, r_mask], 1), r_mask)


def to_padded(rows: Sequence[Sequence[float]], width: int) -> torch.Tensor:
    """Ragged float lists → (B, width) float32, zero-padded on the right."""
    out = torch.zeros(len(rows), width, dtype=torch.float32)
    for i, row in enumerate(rows):
        out[i, : len(row)] = torch.as_tensor(row, dtype=torch.float32)
    return out
