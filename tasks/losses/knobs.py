"""The policy-loss variants' own knobs (`actor.policy_loss.*`): read by the config (and so
by the driver), apart from the torch code that uses them (`policy/`)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from alignflow.errors import require


@dataclass(frozen=True, kw_only=True)
class PolicyLossKnobs:
    """Knobs of the policy-loss variants beyond the PPO clip (veRL's names and defaults).

    sapo_tau_pos: SAPO's gate temperature τ for tokens with A > 0
    sapo_tau_neg: SAPO's τ for tokens with A <= 0 (> tau_pos: negative updates decay faster)
    clip_cov_ratio: Clip-Cov: the share of tokens whose loss is cut (among those with covariance in [clip_cov_lb, clip_cov_ub])
    clip_cov_lb: Clip-Cov: the covariance band's lower end
    clip_cov_ub: Clip-Cov: the covariance band's upper end
    kl_cov_ratio: KL-Cov: the share of tokens, those of largest covariance, that get the |log-ratio| penalty
    kl_cov_coef: KL-Cov: the weight of that penalty
    dppo_ratio_cap: DPPO: the importance ratio is truncated at this value (detached)
    """

    sapo_tau_pos: float = 1.0
    sapo_tau_neg: float = 1.05
    clip_cov_ratio: float = 0.0002
    clip_cov_lb: float = 1.0
    clip_cov_ub: float = 5.0
    kl_cov_ratio: float = 0.0002
    kl_cov_coef: float = 1.0
    dppo_ratio_cap: float = 20.0

    def __post_init__(self) -> None:
        for name in ("sapo_tau_pos", "sapo_tau_neg", "kl_cov_coef", "dppo_ratio_cap"):
            value = getattr(self, name)
            require(math.isfinite(value) and value > 0, name, "a finite float > 0", value)
        for name in ("clip_cov_ratio", "kl_cov_ratio"):
            value = getattr(self, name)
            require(0 < value <= 1, name, "a share in (0, 1]", value)
        for name in ("clip_cov_lb", "clip_cov_ub"):
            value = getattr(self, name)
            require(math.isfinite(value), name, "a finite float", value)
        bounds = (self.clip_cov_lb, self.clip_cov_ub)
        require(not all(map(math.isfinite, bounds)) or bounds[0] < bounds[1], "clip_cov_lb",
                f"a float below clip_cov_ub={self.clip_cov_ub}", self.clip_cov_lb)
