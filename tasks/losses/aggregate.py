"""Reduce a (B, T) per-token loss to a scalar, so that micro-batches add up to the full batch.

Every mode divides by a normaliser that the caller may fix for the whole optimiser step
(`num_tokens` or `num_seqs`). Summing the micro-batch losses computed with the step's
normaliser then gives exactly the loss (and gradient) of one big batch, which is what
gradient accumulation needs. Left as None, the normaliser is the micro-batch's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import get_args

import torch
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.names import Aggregation


def upcast(x: Tensor) -> Tensor:
    """Half / bfloat16 → float32 for stable log-softmax and exp; float32/64 kept as they are."""
    return x if x.dtype in (torch.float32, torch.float64) else x.float()


def masked_sum(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Σ x·mask over `dim` (all dims when None); masked entries never leak NaN/inf."""
    kept = torch.where(mask.bool(), x, x.new_zeros(()))
    return kept.sum() if dim is None else kept.sum(dim)


def masked_mean(x: Tensor, mask: Tensor, dim: int | None = None) -> Tensor:
    """Σ x·mask / Σ mask over `dim`; a row with no valid entry gives 0, not NaN."""
    count = mask.to(x.dtype).sum() if dim is None else mask.to(x.dtype).sum(dim)
    return masked_sum(x, mask, dim) / count.clamp(min=1)


def token_mean(
    x: Tensor, mask: Tensor, *, num_tokens: float | None = None, **_: object
) -> Tensor:
    """Σ_{b,t} x·m / N_tokens, N_tokens the valid tokens of the whole step (default: this batch)."""
    n = mask.sum().clamp(min=1) if num_tokens is None else num_tokens
    return masked_sum(x, mask) / n


def seq_mean_token_mean(
    x: Tensor, mask: Tensor, *, num_seqs: int | None = None, **_: object
) -> Tensor:
    """Σ_b (Σ_t x·m / Σ_t m) / N_seqs: each sequence weighs the same, whatever its length;
    N_seqs the sequences with a token (as OpenRLHF counts them; default: this batch's)."""
    n = max(int((mask.sum(-1) > 0).sum()), 1) if num_seqs is None else num_seqs
    return masked_mean(x, mask, dim=-1).sum() / n


def seq_mean_token_sum_norm(
    x: Tensor, mask: Tensor, *, num_seqs: int | None = None, max_len: int | None = None,
    **_: object,
) -> Tensor:
    """Dr.GRPO: Σ_b (Σ_t x·m / L_max) / N_seqs with a constant L_max (default: T), no length bias."""
    n = mask.shape[0] if num_seqs is None else num_seqs
    length = mask.shape[-1] if max_len is None else max_len
    return masked_sum(x, mask, dim=-1).sum() / (length * n)


AGGREGATIONS: dict[Aggregation, Callable[..., Tensor]] = {
    "token-mean": token_mean,
    "seq-mean-token-mean": seq_mean_token_mean,
    "seq-mean-token-sum-norm": seq_mean_token_sum_norm,
}


@dataclass(frozen=True)
class Normaliser:
    """What a loss is divided by when micro-batches must sum to the step's loss: the
    step's valid tokens, its sequences with a token, Dr.GRPO's constant length (each None:
    counted on the batch at hand)."""

    num_tokens: float | None = None
    num_seqs: int | None = None
    max_len: int | None = None


def aggregate(x: Tensor, mask: Tensor, mode: Aggregation = "token-mean",
              norm: Normaliser | None = None) -> Tensor:
    """Reduce per-token `x` (B, T) under `mask` with the named mode; see the module docstring."""
    fn = AGGREGATIONS.get(mode)
    if fn is None:
        raise ConfigError(f"loss aggregation {mode!r}: expected one of {get_args(Aggregation)}")
    norm = norm or Normaliser()
    return fn(x, mask, num_tokens=norm.num_tokens, num_seqs=norm.num_seqs, max_len=norm.max_len)
