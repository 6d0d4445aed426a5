"""Per-token estimators of KL(π ‖ π_ref) from log-probs of tokens sampled from π.

Schulman, "Approximating KL divergence" (joschu.net/blog/kl-approx.html). With
x = log π(a) − log π_ref(a): k1 = x (unbiased, can be negative), k2 = x²/2 (biased, ≥ 0),
k3 = e^{−x} − 1 + x (unbiased, ≥ 0). As OpenRLHF's `compute_approx_kl`, the *estimate* is
clamped to [−10, 10] (so k3 at x = −10 is 10, not e^10 − 11). Before that, x itself is
held to [−20, 20], which changes no clamped value (every estimator is already past ±10
there) but keeps e^{−x} finite, so the clamp's zero gradient never meets an infinity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import get_args

import torch
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.aggregate import upcast
from alignflow.tasks.losses.names import KLEstimator

ESTIMATE_CLAMP = 10.0  # OpenRLHF's
# The one guard on a log-ratio of two policies (KL estimates, PPO's ratio, the IS weights):
# exp(±20) stays finite in float32, as OpenRLHF 0.11 clamps it (0.9.10 had none).
LOG_RATIO_LIMIT = 20.0


def log_ratio(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """x = logp − ref_logp (at least float32), held to [−20, 20]."""
    return (upcast(logp) - upcast(ref_logp)).clamp(-LOG_RATIO_LIMIT, LOG_RATIO_LIMIT)


def _clamped(estimate: Tensor) -> Tensor:
    return estimate.clamp(-ESTIMATE_CLAMP, ESTIMATE_CLAMP)


def k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = clamp(x, ±10)."""
    return _clamped(log_ratio(logp, ref_logp))


def k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k2 = clamp(x² / 2, ±10)."""
    return _clamped(log_ratio(logp, ref_logp).pow(2) / 2.0)


def k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 = clamp(exp(−x) − 1 + x, ±10)  (= r − 1 − log r with r = π_ref/π)."""
    x = log_ratio(logp, ref_logp)
    return _clamped(torch.expm1(-x) + x)


KL_ESTIMATORS: dict[KLEstimator, Callable[[Tensor, Tensor], Tensor]] = {
    "k1": k1,
    "k2": k2,
    "k3": k3,
}


def approx_kl(logp: Tensor, ref_logp: Tensor, estimator: KLEstimator = "k1") -> Tensor:
    """Per-token KL estimate (same shape as `logp`) with the named estimator."""
    fn = KL_ESTIMATORS.get(estimator)
    if fn is None:
        raise ConfigError(f"kl estimator {estimator!r}: expected one of {get_args(KLEstimator)}")
    return fn(logp, ref_logp)
