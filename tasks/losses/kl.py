"""Per-token estimators of KL(π ‖ π_ref) from log-probs of tokens sampled from π.

Schulman, "Approximating KL divergence" (joschu.net/blog/kl-approx.html). With
x = log π(a) − log π_ref(a) (clamped to [−10, 10] so exp(−x) cannot overflow):
k1 = x (unbiased, can be negative), k2 = x²/2 (biased, ≥ 0), k3 = e^{−x} − 1 + x
(unbiased, ≥ 0). Sign conventions match OpenRLHF's `compute_approx_kl`; OpenRLHF clamps
the estimate to [−10, 10] instead of the log-ratio.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

import torch
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.aggregate import upcast

KLEstimator = Literal["k1", "k2", "k3"]
LOG_RATIO_CLAMP = 10.0


def log_ratio(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """x = logp − ref_logp (at least float32), clamped to [−10, 10]."""
    return (upcast(logp) - upcast(ref_logp)).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)


def k1(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k1 = x."""
    return log_ratio(logp, ref_logp)


def k2(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k2 = x² / 2."""
    return log_ratio(logp, ref_logp).pow(2) / 2.0


def k3(logp: Tensor, ref_logp: Tensor) -> Tensor:
    """k3 = exp(−x) − 1 + x  (= r − 1 − log r with r = π_ref/π)."""
    x = log_ratio(logp, ref_logp)
    return torch.expm1(-x) + x


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
