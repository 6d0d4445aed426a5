"""The one entry of every policy loss: `policy_loss` takes the named variant's per-token
loss (`POLICY_LOSSES`, one signature: `variants.py`, `covariance.py`), weights it by the IS
correction, reduces it with the aggregation mode (aggregate.py) and reports metrics.
Pass the step's counts (`norm`: `aggregate.Normaliser`) when accumulating gradients over
micro-batches so the sum of micro-batch losses equals the one-batch loss. Also the
critic's `value_loss` and the KL-as-loss term `kl_loss`."""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import torch
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.aggregate import Aggregation, Normaliser, aggregate, masked_mean
from alignflow.tasks.losses.kl import KLEstimator, approx_kl
from alignflow.tasks.losses.names import PolicyLossName
from alignflow.tasks.losses.policy import covariance, variants
from alignflow.tasks.losses.policy.clipped import clip_mask, importance_ratio, sequence_ratio
from alignflow.tasks.losses.policy.knobs import PolicyLossKnobs, Surrogate

Variant = Callable[[Tensor, Tensor, Tensor, Tensor, Surrogate], Tensor]
POLICY_LOSSES: dict[PolicyLossName, Variant] = {
    "ppo": variants.ppo, "dual_clip": variants.ppo, "gspo": variants.gspo,
    "cispo": variants.cispo, "sapo": variants.sapo, "gmpo": variants.gmpo,
    "gpg": variants.gpg, "clip_cov": covariance.clip_cov, "kl_cov": covariance.kl_cov,
    "dppo_tv": variants.dppo_tv, "dppo_kl": variants.dppo_kl,
}
# reduced per sequence whatever `agg`: the sequence-level ratios, and SAPO (as veRL does)
SEQUENCE_LEVEL: frozenset[str] = frozenset({"gspo", "gmpo", "sapo"})
# a ratio against the behaviour policy of its own (OpenRLHF's GSPO): no IS weight on top
OWN_BEHAVIOUR_RATIO: frozenset[str] = frozenset({"gspo"})


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
        clipped = clip_mask(ratio, adv, eps_low, high)
        return {
            "clip_frac": masked_mean(clipped.float(), mask),
            "approx_kl": masked_mean((old_logp - logp).float(), mask),
            "ratio_mean": masked_mean(ratio.float(), mask),
        }


def _surrogate(name: str, eps_low: float, eps_high: float | None, dual_clip: float | None,
               knobs: PolicyLossKnobs | None) -> Surrogate:
    if name not in POLICY_LOSSES:
        raise ConfigError(f"policy loss {name!r}: expected one of {get_args(PolicyLossName)}")
    if name == "dual_clip" and (dual_clip is None or dual_clip <= 1.0):
        raise ConfigError(f"dual_clip={dual_clip}: expected a value > 1.0 (e.g. 3.0)")
    if name not in ("dual_clip", "gspo"):
        dual_clip = None
    return Surrogate(eps_low=eps_low, eps_high=eps_low if eps_high is None else eps_high,
                     dual_clip=dual_clip, knobs=knobs or PolicyLossKnobs())


def policy_loss(
    logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, *,
    name: PolicyLossName = "ppo", eps_low: float = 0.2, eps_high: float | None = None,
    dual_clip: float | None = 3.0, agg: Aggregation = "token-mean",
    norm: Normaliser | None = None, weights: Tensor | None = None,
    knobs: PolicyLossKnobs | None = None,
) -> tuple[Tensor, dict[str, Tensor]]:
    """The named per-token policy loss reduced by `agg` (sequence-level variants: by
    sequence, whatever `agg`); returns (loss, metrics). `dual_clip` applies to `dual_clip`
    and (when given) `gspo`. `weights`: a detached weight on each token's loss before the
    reduction (the IS correction against the behaviour policy: `is_correction.is_weights`,
    with `old_logp` the proximal ones)."""
    s = _surrogate(name, eps_low, eps_high, dual_clip, knobs)
    if name in OWN_BEHAVIOUR_RATIO and weights is not None:
        raise ConfigError(f"policy loss {name!r} with IS correction: expected another variant "
                          "(GSPO takes its ratio against the behaviour policy instead)")
    per_token = POLICY_LOSSES[name](logp, old_logp, adv, mask, s)
    if weights is not None:
        per_token = per_token * weights.to(per_token.dtype)
    if name in SEQUENCE_LEVEL:
        agg = "seq-mean-token-mean"
    loss = aggregate(per_token, mask, agg, norm)
    return loss, policy_metrics(logp, old_logp, adv, mask, eps_low=s.eps_low,
                                eps_high=s.eps_high, sequence=name == "gspo")


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
