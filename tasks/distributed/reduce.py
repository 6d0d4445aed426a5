"""Global (all-reduced) normalisers and statistics for data-parallel losses.

With the batch sharded over ranks, every per-batch denominator (valid tokens, sequences)
and every batch statistic (advantage mean and variance) must be taken over all ranks, or
the result depends on the number of workers. DeepSpeed (like DDP) *averages* gradients
over ranks; alignflow's trainers scale each backward by the world size, so gradients are
*summed* and a rank's loss is just `Σ_local ℓ / N_global`: the sum of those gradients is
the gradient of `Σ_all ℓ / N_global`, the one-worker loss. Step statistics that are such
shares add up over ranks the same way (`global_shares`).
Outside a process group every function is the plain local computation.
"""

from __future__ import annotations

from typing import TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

from alignflow.tasks.distributed.group import rank_and_size

T = TypeVar("T")


def all_reduce_sum(x: Tensor) -> Tensor:
    """Σ over ranks of `x` (a new tensor; float64 on the wire so counts and sums stay exact)."""
    out = x.detach().to(torch.float64).clone()
    if rank_and_size()[1] > 1:
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out.to(x.dtype)


def global_sum(value: float) -> float:
    """Σ over ranks of a Python number."""
    return float(all_reduce_sum(torch.tensor(float(value), dtype=torch.float64)))


def global_count(mask: Tensor) -> float:
    """Valid entries of `mask` over all ranks (the step's `num_tokens` for token means)."""
    return global_sum(float(mask.bool().sum()))


def global_shares(stats: dict[str, float], *, same: tuple[str, ...] = ("grad_norm", "lr", "step")
                  ) -> dict[str, float]:
    """`stats` with every value summed over ranks (one all-reduce) except the keys in `same`,
    which every rank already holds (the global gradient norm, the LR, the step count).
    Every rank must pass the same keys."""
    keys = sorted(k for k in stats if k not in same)
    if rank_and_size()[1] == 1 or not keys:
        return dict(stats)
    total = all_reduce_sum(torch.tensor([float(stats[k]) for k in keys], dtype=torch.float64))
    return {**stats, **{k: float(v) for k, v in zip(keys, total.tolist(), strict=True)}}


def gather_lists(values: dict[str, list]) -> dict[str, list]:
    """Each key's lists of every rank concatenated in rank order (per-example values of a
    sharded step, for the rows rank 0 commits)."""
    if rank_and_size()[1] == 1:
        return values
    parts: list[dict[str, list] | None] = [None] * rank_and_size()[1]
    dist.all_gather_object(parts, values)
    return {k: [v for part in parts for v in part[k]] for k in values}


def from_rank0(value: T) -> T:
    """Rank 0's `value` on every rank (a decision the ranks must take together)."""
    if rank_and_size()[1] == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def global_masked_moments(x: Tensor, mask: Tensor) -> tuple[Tensor, Tensor, float]:
    """(mean, biased variance, count) of `x` at valid positions of every rank, float64.

    Two all-reduces (sum and count, then squared deviations from the global mean), the same
    two-pass arithmetic a single worker does, so results agree to float error.
    """
    m = mask.bool()
    local = torch.stack([torch.where(m, x, 0.0).to(torch.float64).sum(),
                         m.sum().to(torch.float64)])
    total, count = all_reduce_sum(local).unbind()
    mean = total / count.clamp(min=1)
    sq = torch.where(m, (x.to(torch.float64) - mean).pow(2), 0.0).sum()
    var = all_reduce_sum(sq) / count.clamp(min=1)
    return mean, var, float(count)


def global_whiten(x: Tensor, mask: Tensor, *, use_std: bool = True, eps: float = 1e-8) -> Tensor:
    """`advantages.normalize.whiten` with μ and σ² over all ranks' valid tokens."""
    mean, var, _ = global_masked_moments(x, mask)
    centred = x - mean.to(x.dtype)
    if use_std:
        centred = centred * var.clamp(min=eps).rsqrt().to(x.dtype)
    return torch.where(mask.bool(), centred, 0.0)
