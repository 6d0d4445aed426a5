"""Clip-Cov and KL-Cov (Cui et al. 2025, "The Entropy Mechanism of Reinforcement Learning
for Reasoning Language Models", arXiv 2505.22617): entropy collapses through the tokens
whose log-probability and advantage co-vary most, so these two variants restrain only them.

The covariance of token t is Cov_t = (A_t − mean A)·(logp_t − mean logp), the means over
the batch's valid tokens (of the micro-batch at hand, as veRL takes them). Same signature
as every variant (`variants.py`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from alignflow.tasks.losses.aggregate import masked_mean
from alignflow.tasks.losses.policy.clipped import clip_mask, clipped_surrogate, importance_ratio
from alignflow.tasks.losses.policy.knobs import Surrogate

SEED = 0  # Clip-Cov's draw among its candidates: fixed, so a replayed step is the same


def covariance(logp: Tensor, adv: Tensor, mask: Tensor) -> Tensor:
    """Cov_t (detached) over the valid tokens of the batch."""
    with torch.no_grad():
        return (adv - masked_mean(adv, mask)) * (logp - masked_mean(logp, mask))


def clip_cov(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
             s: Surrogate) -> Tensor:
    """Clip-Cov: PPO's clipped loss, with the loss of ⌊r·N⌋ (at least 1) tokens drawn among
    those PPO did not clip whose Cov_t lies in (lb, ub) set to 0 (r = clip_cov_ratio, N the
    valid tokens): those tokens take no gradient this step."""
    k, valid = s.knobs, mask.bool()
    ratio = importance_ratio(logp, old_logp)
    loss = clipped_surrogate(ratio, adv, s.eps_low, s.eps_high)
    clipped = clip_mask(ratio, adv, s.eps_low, s.eps_high) & valid
    cov = covariance(logp, adv, mask)
    band = (cov > k.clip_cov_lb) & (cov < k.clip_cov_ub) & valid & ~clipped
    where = band.nonzero()
    count = max(int(k.clip_cov_ratio * float(mask.sum())), 1)
    order = torch.randperm(len(where), generator=torch.Generator().manual_seed(SEED))
    chosen = where[order[:count].to(where.device)]
    keep = torch.ones_like(loss)
    keep[chosen[:, 0], chosen[:, 1]] = 0
    return loss * keep


def kl_cov(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor,
           s: Surrogate) -> Tensor:
    """KL-Cov: the unclipped −ρ_t·A_t, plus coef·|logp_t − old_t| on the ⌊r·N⌋ (at least 1)
    valid tokens of largest Cov_t (r = kl_cov_ratio)."""
    k, valid = s.knobs, mask.bool()
    log_ratio = logp - old_logp
    loss = -adv * log_ratio.exp()
    cov = covariance(logp, adv, mask)[valid]
    if cov.numel() == 0:
        return loss
    count = max(int(cov.numel() * k.kl_cov_ratio), 1)
    flat = valid.flatten().nonzero().flatten()[torch.topk(cov, count).indices]
    penalty = torch.zeros(loss.numel(), dtype=torch.bool, device=loss.device)
    penalty[flat] = True
    return loss + k.kl_cov_coef * log_ratio.abs() * penalty.view_as(loss).to(loss.dtype)
