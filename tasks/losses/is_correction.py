"""Importance-sampling correction of the policy loss for off-policy tokens.

A token sampled by a behaviour policy μ (a stale generator in an asynchronous run, or an
inference engine whose numbers differ from the trainer's) is learned by the PPO surrogate
against the proximal policy π_old (the learner's weights before this step). The correction
multiplies each token's loss by a detached weight built from the log-ratio

    r_t = log π_old(y_t) − log μ(y_t)        (clamped to ±20 before exp, for finite weights)

Variants (OpenRLHF 0.11's `algo.advantage.is_correction_type`), thresholds `low < high`:
- `tis`:          w_t = clamp(e^{r_t}, low, high)                      (truncated IS)
- `icepop`:       w_t = e^{r_t} · 1[low ≤ e^{r_t} ≤ high]              (tokens outside dropped)
- `seq-mask-tis`: s_b = exp(Σ_t m_bt r_bt / Σ_t m_bt) (geometric mean over the sequence);
                  w_bt = e^{r_bt} · 1[low ≤ s_b ≤ high]                 (whole sequence dropped)

The corrected loss is agg(w_t · ℓ_t^ppo(π_θ, π_old, A_t)) over the action mask:
`policy.policy_loss(logp, old_logp, ..., weights=is_weights(old_logp, behaviour_logp, ...))`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import torch
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.aggregate import masked_mean
from alignflow.tasks.losses.kl import LOG_RATIO_LIMIT
from alignflow.tasks.losses.names import ISCorrection


def tis(log_ratio: Tensor, mask: Tensor, *, low: float, high: float) -> Tensor:
    """w_t = clamp(e^{r_t}, low, high)."""
    return log_ratio.exp().clamp(low, high)


def icepop(log_ratio: Tensor, mask: Tensor, *, low: float, high: float) -> Tensor:
    """w_t = e^{r_t} · 1[low ≤ e^{r_t} ≤ high]."""
    w = log_ratio.exp()
    return w * ((w >= low) & (w <= high)).to(w.dtype)


def seq_mask_tis(log_ratio: Tensor, mask: Tensor, *, low: float, high: float) -> Tensor:
    """w_bt = e^{r_bt} · 1[low ≤ exp(mean_t r_bt) ≤ high] (mean over the action mask)."""
    seq = torch.exp(masked_mean(log_ratio, mask, dim=-1))
    keep = ((seq >= low) & (seq <= high)).to(log_ratio.dtype)
    return log_ratio.exp() * keep[:, None]


IS_CORRECTIONS: dict[ISCorrection, Callable[..., Tensor]] = {
    "tis": tis,
    "icepop": icepop,
    "seq-mask-tis": seq_mask_tis,
}


def check_thresholds(low: float, high: float, where: str = "is_correction_threshold") -> None:
    if not 0.0 <= low < high:
        raise ConfigError(f"{where}=({low}, {high}): expected 0 <= low < high, e.g. (0.5, 5.0)")


def is_weights(old_logp: Tensor, behaviour_logp: Tensor, mask: Tensor, *,
               kind: ISCorrection = "tis", low: float = 0.5, high: float = 5.0
               ) -> tuple[Tensor, dict[str, Tensor]]:
    """Detached (B, T) weights (0 on padding) and metrics: `is_weight_mean`, `is_trunc_frac`
    (share of tokens whose weight the variant changed), `is_mismatch_kl` = mean(μ − π_old)."""
    if kind not in IS_CORRECTIONS:
        raise ConfigError(f"is_correction_type {kind!r}: expected one of {get_args(ISCorrection)}")
    check_thresholds(low, high)
    with torch.no_grad():
        dtype = torch.float64 if old_logp.dtype == torch.float64 else torch.float32
        maskf = mask.to(dtype)
        log_ratio = (old_logp.to(dtype) - behaviour_logp.to(dtype)).clamp(-LOG_RATIO_LIMIT,
                                                                           LOG_RATIO_LIMIT)
        w = IS_CORRECTIONS[kind](log_ratio * maskf, maskf, low=low, high=high) * maskf
        changed = (w != log_ratio.exp() * maskf).to(dtype)
        metrics = {"is_weight_mean": masked_mean(w, maskf),
                   "is_trunc_frac": masked_mean(changed, maskf),
                   "is_mismatch_kl": masked_mean(-log_ratio, maskf)}
    return w, metrics
