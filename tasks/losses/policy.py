"""PPO-family actor and critic losses on (B, T) per-token log-probs with an action mask.

Per-token variants are registered in `POLICY_LOSSES`; `policy_loss` reduces them with an
aggregation mode (aggregate.py) and reports metrics. Pass the step's counts (`norm`:
`aggregate.Normaliser`) when accumulating gradients over micro-batches so the sum of micro-batch
losses equals the one-batch loss.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import torch
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.aggregate import Aggregation, Normaliser, aggregate, masked_mean
from alignflow.tasks.losses.kl import LOG_RATIO_LIMIT, KLEstimator, approx_kl
from alignflow.tasks.losses.names import PolicyLossName


def importance_ratio(logp: Tensor, old_logp: Tensor) -> Tensor:
    """ρ_t = exp(clamp(logp − old_logp, ±20)): a token whose probability moved by e^20 or more
    gets a finite ratio (and no gradient through the clamp) instead of inf."""
    return torch.exp((logp - old_logp).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT))


def ppo_clip_tokens(
    logp: Tensor, old_logp: Tensor, adv: Tensor, *, eps_low: float = 0.2,
    eps_high: float | None = None,
) -> Tensor:
    """ℓ_t = −min(ρ_t A_t, clip(ρ_t, 1−ε_low, 1+ε_high) A_t), ρ_t = exp(clamp(logp − old_logp,
    ±20))."""
    ratio = importance_ratio(logp, old_logp)
    high = eps_low if eps_high is None else eps_high
    return -torch.minimum(ratio * adv, ratio.clamp(1.0 - eps_low, 1.0 + high) * adv)


def dual_clip_tokens(
    logp: Tensor, old_logp: Tensor, adv: Tensor, *, eps_low: float = 0.2,
    eps_high: float | None = None, dual_clip: float = 3.0,
) -> Tensor:
    """Dual-clip PPO (Ye et al. 2020): for A_t < 0, ℓ_t = min(ℓ_t^ppo, −c·A_t); c > 1.

    Bounds the loss of a negative-advantage token whose ratio has blown up at c·|A_t|.
    """
    if dual_clip <= 1.0:
        raise ConfigError(f"dual_clip={dual_clip}: expected a value > 1.0 (e.g. 3.0)")
    ppo = ppo_clip_tokens(logp, old_logp, adv, eps_low=eps_low, eps_high=eps_high)
    return torch.where(adv < 0, torch.minimum(ppo, -dual_clip * adv), ppo)


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
    ratio = sequence_ratio(logp, old_logp, mask)
    high = eps_low if eps_high is None else eps_high
    loss = -torch.minimum(ratio * adv, ratio.clamp(1.0 - eps_low, 1.0 + high) * adv)
    if dual_clip is None:
        return loss
    return torch.where(adv < 0, torch.minimum(loss, -dual_clip * adv), loss)


POLICY_LOSSES: dict[PolicyLossName, Callable[..., Tensor]] = {
    "ppo": ppo_clip_tokens,
    "dual_clip": dual_clip_tokens,
    "gspo": gspo_tokens,
}


def policy_metrics(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, *, eps_low: float = 0.2,
    eps_high: float | None = None, sequence: bool = False,
) -> dict[str, Tensor]:
    """Detached 0-dim tensors (call .item() to log): clip_frac, approx_kl, ratio_mean.

    clip_frac: share of tokens where the clipped surrogate is the smaller one;
    approx_kl: mean of old_logp − logp (k1 of KL(π_old ‖ π)), as OpenRLHF logs it;
    `sequence`: of GSPO's sequence-level ratio.
    """
    with torch.no_grad():
        ratio = (sequence_ratio(logp, old_logp, mask) if sequence
                 else importance_ratio(logp, old_logp))
        high = eps_low if eps_high is None else eps_high
        clipped = ratio.clamp(1.0 - eps_low, 1.0 + high) * adv < ratio * adv
        return {
            "clip_frac": masked_mean(clipped.float(), mask),
            "approx_kl": masked_mean((old_logp - logp).float(), mask),
            "ratio_mean": masked_mean(ratio.float(), mask),
        }


def policy_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, *,
    name: PolicyLossName = "ppo", eps_low: float = 0.2, eps_high: float | None = None,
    dual_clip: float | None = 3.0, agg: Aggregation = "token-mean",
    norm: Normaliser | None = None, weights: Tensor | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The named per-token policy loss reduced by `agg` (GSPO: by sequence, whatever
    `agg`; its `dual_clip` applies when given); returns (loss, metrics). `weights`: a
    detached weight on each token's loss before the reduction (the IS correction against
    the behaviour policy: `is_correction.is_weights`, with `old_logp` the proximal ones)."""
    if name not in POLICY_LOSSES:
        raise ConfigError(f"policy loss {name!r}: expected one of {get_args(PolicyLossName)}")
    if name == "gspo" and weights is not None:
        raise ConfigError("policy loss 'gspo' with IS correction: expected ppo or dual_clip "
                          "(GSPO takes its ratio against the behaviour policy instead)")
    if name == "gspo":
        per_token = gspo_tokens(logp, old_logp, adv, mask, eps_low=eps_low, eps_high=eps_high,
                                dual_clip=dual_clip)
        agg = "seq-mean-token-mean"
    else:
        extra = {"dual_clip": dual_clip} if name == "dual_clip" else {}
        per_token = POLICY_LOSSES[name](logp, old_logp, adv, eps_low=eps_low,
                                        eps_high=eps_high, **extra)
    if weights is not None:
        per_token = per_token * weights.to(per_token.dtype)
    loss = aggregate(per_token, mask, agg, norm)
    return loss, policy_metrics(logp, old_logp, adv, mask, eps_low=eps_low, eps_high=eps_high,
                                sequence=name == "gspo")


def value_loss(
    values: Tensor, old_values: Tensor, returns: Tensor, mask: Tensor, *,
    clip: float | None = 0.5, agg: Aggregation = "token-mean", norm: Normaliser | None = None,
) -> Tensor:
    """½ · agg(max((V_clip − R)², (V − R)²)), V_clip = V_old + clip(V − V_old, ±clip).

    With clip=None the unclipped ½ · agg((V − R)²).
    """
    loss = (values - returns).pow(2)
    if clip is not None:
        clipped = old_values + (values - old_values).clamp(-clip, clip)
        loss = torch.maximum(loss, (clipped - returns).pow(2))
    return 0.5 * aggregate(loss, mask, agg, norm)


def kl_loss(
    logp: Tensor, ref_logp: Tensor, mask: Tensor, *, estimator: KLEstimator = "k3",
    agg: Aggregation = "token-mean", norm: Normaliser | None = None,
) -> Tensor:
    """KL-as-loss (GRPO): agg(k(logp, ref_logp)); the caller scales it by its β."""
    kl = approx_kl(logp, ref_logp, estimator)
    return aggregate(kl, mask, agg, norm)
