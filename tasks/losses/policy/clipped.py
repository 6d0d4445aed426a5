"""The clipped surrogate every ratio-based variant starts from: the importance ratio (per
token, or GSPO's per sequence) and PPO's clip, with the dual clip of Ye et al. 2020."""

from __future__ import annotations

import torch
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.kl import LOG_RATIO_LIMIT


def importance_ratio(logp: Tensor, old_logp: Tensor) -> Tensor:
    """ρ_t = exp(clamp(logp − old_logp, ±20)): a token whose probability moved by e^20 or more
    gets a finite ratio (and no gradient through the clamp) instead of inf."""
    return torch.exp((logp - old_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))


def clip_mask(ratio: Tensor, adv: Tensor, eps_low: float, eps_high: float) -> Tensor:
    """True where the clipped term is the smaller one: the tokens PPO's clip holds (no
    gradient through ρ there). The one place the clip is decided: the loss, its
    `clip_frac` metric and Clip-Cov's candidates all read it."""
    return ratio.clamp(1.0 - eps_low, 1.0 + eps_high) * adv < ratio * adv


def clipped_surrogate(ratio: Tensor, adv: Tensor, eps_low: float, eps_high: float,
                      dual_clip: float | None = None) -> Tensor:
    """ℓ = −min(ρ A, clip(ρ, 1−ε_low, 1+ε_high) A); with c and A < 0, ℓ = min(ℓ, −c·A)."""
    clipped = ratio.clamp(1.0 - eps_low, 1.0 + eps_high)
    loss = -torch.where(clip_mask(ratio, adv, eps_low, eps_high), clipped, ratio) * adv
    if dual_clip is None:
        return loss
    return torch.where(adv < 0, torch.minimum(loss, -dual_clip * adv), loss)


def ppo_clip_tokens(
    logp: Tensor, old_logp: Tensor, adv: Tensor, *, eps_low: float = 0.2,
    eps_high: float | None = None,
) -> Tensor:
    """ℓ_t = −min(ρ_t A_t, clip(ρ_t, 1−ε_low, 1+ε_high) A_t), ρ_t = exp(clamp(logp − old_logp,
    ±20))."""
    high = eps_low if eps_high is None else eps_high
    return clipped_surrogate(importance_ratio(logp, old_logp), adv, eps_low, high)


def dual_clip_tokens(
    logp: Tensor, old_logp: Tensor, adv: Tensor, *, eps_low: float = 0.2,
    eps_high: float | None = None, dual_clip: float = 3.0,
) -> Tensor:
    """Dual-clip PPO (Ye et al. 2020): for A_t < 0, ℓ_t = min(ℓ_t^ppo, −c·A_t); c > 1.

    Bounds the loss of a negative-advantage token whose ratio has blown up at c·|A_t|.
    """
    if dual_clip <= 1.0:
        raise ConfigError(f"dual_clip={dual_clip}: expected a value > 1.0 (e.g. 3.0)")
    high = eps_low if eps_high is None else eps_high
    return clipped_surrogate(importance_ratio(logp, old_logp), adv, eps_low, high, dual_clip)


def sequence_ratio(logp: Tensor, old_logp: Tensor, mask: Tensor) -> Tensor:
    """GSPO's ρ_b = exp(Σ_t m_bt (logp − old_logp) / max(Σ_t m_bt, 1)), on every token of
    row b (0 on padding); no clamp, as OpenRLHF computes it."""
    maskf = mask.to(logp.dtype)
    mean = ((logp - old_logp) * maskf).sum(-1) / maskf.sum(-1).clamp(min=1)
    return mean.exp().unsqueeze(-1) * maskf


def gspo_tokens(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, *, eps_low: float = 0.2,
    eps_high: float | None = None, dual_clip: float | None = None,
) -> Tensor:
    """GSPO (Zheng et al. 2025, OpenRLHF's `policy_loss_type=gspo`): the PPO clip applied to
    the sequence-level ratio ρ_b (`sequence_ratio`) instead of each token's,
    ℓ_t = −min(ρ_b A_t, clip(ρ_b, 1−ε_low, 1+ε_high) A_t); with c (dual clip) and A_t < 0,
    ℓ_t = min(ℓ_t, −c·A_t). Reduced per sequence (seq-mean-token-mean), as OpenRLHF does."""
    high = eps_low if eps_high is None else eps_high
    return clipped_surrogate(sequence_ratio(logp, old_logp, mask), adv, eps_low, high,
                             dual_clip)
