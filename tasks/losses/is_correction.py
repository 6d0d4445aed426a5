"""Importance-sampling correction of the policy loss for off-policy tokens.

A token sampled by a behaviour policy μ (a stale generator in an asynchronous run, or an
inference engine whose numbers differ from the trainer's) is learned by the PPO surrogate
against the proximal policy π_old (the learner's weights before this step). The correction
multiplies each token's loss by a detached weight built from the log-ratio

    r_t = log π_old(y_t) − log μ(y_t)        (clamped to ±20 before exp, for finite weights)

Variants (OpenRLHF 0.11's `algo.advantage.is_correction_type`; 0.11.2's level × mode:
tis = token clip, icepop = token mask, seq-mask-tis = seq mask), thresholds `low < high`:
- `tis`:          w_t = clamp(e^{r_t}, low, high)                      (truncated IS)
- `icepop`:       w_t = e^{r_t} · 1[low ≤ e^{r_t} ≤ high]              (tokens outside dropped)
- `seq-mask-tis`: s_b = exp(Σ_t m_bt r_bt / Σ_t m_bt) (geometric mean over the sequence);
                  w_bt = e^{r_bt} · 1[low ≤ s_b ≤ high]                 (whole sequence dropped)

Gating (0.11.2's `is_correction_gating`): the masks above read the ratio; `binary_kl` and
`tv` read a divergence of the sampled token's probabilities p = μ(y_t), q = π_old(y_t)
(each clamped to [1e-6, 1 − 1e-6]) instead, bounded from above only (low = 0):
- `binary_kl`: d_t = p log(p/q) + (1 − p) log((1 − p)/(1 − q))
- `tv`:        d_t = |p − q|
and icepop keeps w_t = e^{r_t} where low ≤ d_t ≤ high, seq-mask-tis where the sequence's
mean of d_t is (FlashREINFORCE's trust region: seq, binary_kl, one threshold).

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
from alignflow.tasks.losses.names import ISCorrection, ISGating


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


def divergence(gating: ISGating, old_logp: Tensor, behaviour_logp: Tensor) -> Tensor:
    """The gated divergence d_t of the sampled token (module docstring)."""
    p = behaviour_logp.exp().clamp(1e-6, 1 - 1e-6)
    q = old_logp.exp().clamp(1e-6, 1 - 1e-6)
    if gating == "tv":
        return (p - q).abs()
    return p * (p / q).log() + (1 - p) * ((1 - p) / (1 - q)).log()


def gated(stat: Tensor, log_ratio: Tensor, mask: Tensor, *, sequence: bool, low: float,
          high: float) -> Tensor:
    """w_t = e^{r_t} where the statistic (per token, or its mean over the sequence) lies in
    [low, high], else 0."""
    if sequence:
        stat = masked_mean(stat, mask, dim=-1)[:, None]
    return log_ratio.exp() * ((stat >= low) & (stat <= high)).to(log_ratio.dtype)


IS_CORRECTIONS: dict[ISCorrection, Callable[..., Tensor]] = {
    "tis": tis,
    "icepop": icepop,
    "seq-mask-tis": seq_mask_tis,
}


def check_thresholds(low: float, high: float, where: str = "is_correction_threshold") -> None:
    if not 0.0 <= low < high:
        raise ConfigError(f"{where}=({low}, {high}): expected 0 <= low < high, e.g. (0.5, 5.0)")


def check_gating(kind: ISCorrection, gating: ISGating, low: float) -> None:
    """A divergence gate drops units (icepop, seq-mask-tis), bounded from above only."""
    if gating not in get_args(ISGating):
        raise ConfigError(f"is_correction_gating {gating!r}: expected one of {get_args(ISGating)}")
    if gating != "ratio" and kind == "tis":
        raise ConfigError(f"is_correction_gating={gating} with is_correction_type=tis: expected "
                          "icepop or seq-mask-tis (a divergence gate masks, it cannot clip)")
    if gating != "ratio" and low > 0:
        raise ConfigError(f"is_correction_gating={gating} with is_correction_threshold low={low}:"
                          " expected an upper bound only (one value, or low 0), e.g. [0.003]")


def _weights(kind: ISCorrection, gating: ISGating, old: Tensor, behaviour: Tensor,
             log_ratio: Tensor, mask: Tensor, low: float, high: float) -> Tensor:
    if gating == "ratio":
        return IS_CORRECTIONS[kind](log_ratio * mask, mask, low=low, high=high)
    return gated(divergence(gating, old, behaviour), log_ratio * mask, mask,
                 sequence=kind == "seq-mask-tis", low=low, high=high)


def is_weights(old_logp: Tensor, behaviour_logp: Tensor, mask: Tensor, *,
               kind: ISCorrection = "tis", low: float = 0.5, high: float = 5.0,
               gating: ISGating = "ratio") -> tuple[Tensor, dict[str, Tensor]]:
    """Detached (B, T) weights (0 on padding) and metrics: `is_weight_mean`, `is_trunc_frac`
    (share of tokens whose weight the variant changed), `is_mismatch_kl` = mean(μ − π_old)."""
    if kind not in IS_CORRECTIONS:
        raise ConfigError(f"is_correction_type {kind!r}: expected one of {get_args(ISCorrection)}")
    check_thresholds(low, high)
    check_gating(kind, gating, low)
    with torch.no_grad():
        dtype = torch.float64 if old_logp.dtype == torch.float64 else torch.float32
        maskf = mask.to(dtype)
        old, behaviour = old_logp.to(dtype), behaviour_logp.to(dtype)
        log_ratio = (old - behaviour).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)
        w = _weights(kind, gating, old, behaviour, log_ratio, maskf, low, high) * maskf
        changed = (w != log_ratio.exp() * maskf).to(dtype)
        metrics = {"is_weight_mean": masked_mean(w, maskf),
                   "is_trunc_frac": masked_mean(changed, maskf),
                   "is_mismatch_kl": masked_mean(-log_ratio, maskf)}
    return w, metrics
