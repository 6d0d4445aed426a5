"""The KL penalty to the reference policy: one object owns β and where it applies.

OpenRLHF's two places for it: in the per-token reward (r_t − β·KL_t, the default) or as a
loss term (`algo.kl.use_loss`: L + β·agg(KL), as GRPO does). β is fixed, or adaptive
(`algo.kl.target`: the controller of Ziegler et al. 2019, "Fine-Tuning LMs from Human
Preferences", §2.2); its value is carried from one learn step to the next in `LearnState`,
so a resumed run continues with the same β.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.aggregate import Aggregation, Normaliser
from alignflow.tasks.losses.kl import KLEstimator
from alignflow.tasks.losses.policy import kl_loss
from alignflow.tasks.rl.learn_config import KLConfig
from alignflow.tasks.steps.records import LearnState


@dataclass
class FixedKLController:
    """β stays constant."""

    value: float

    def update(self, current_kl: float, n_steps: int) -> float:
        """No-op; returns β."""
        return self.value

    def state(self) -> dict[str, float]:
        """JSON-ready state for checkpoints."""
        return {"value": self.value}


@dataclass
class AdaptiveKLController:
    """β ← β·(1 + clip(KL/target − 1, −0.2, 0.2)·n_steps/horizon).

    Raises β when the measured KL is above target, lowers it when below; the proportional
    error is clipped to ±0.2 so one noisy step cannot swing β far.
    """

    value: float
    target: float
    horizon: int

    def __post_init__(self) -> None:
        if self.target <= 0 or self.horizon <= 0:
            raise ConfigError(
                f"adaptive KL: target={self.target}, horizon={self.horizon}; expected both > 0"
            )

    def update(self, current_kl: float, n_steps: int) -> float:
        """Apply one update after `n_steps` samples (batch size) with measured `current_kl`."""
        error = min(max(current_kl / self.target - 1.0, -0.2), 0.2)
        self.value *= 1.0 + error * n_steps / self.horizon
        return self.value

    def state(self) -> dict[str, float]:
        """JSON-ready state for checkpoints."""
        return {"value": self.value, "target": self.target, "horizon": self.horizon}


@dataclass
class KLPenalty:
    controller: FixedKLController | AdaptiveKLController
    estimator: KLEstimator
    in_loss: bool

    @classmethod
    def of(cls, cfg: KLConfig, state: LearnState | None) -> KLPenalty:
        """The penalty of this learn step: β from the previous step's state, else the config."""
        beta = state.kl_coef if state else cfg.init_coef
        controller = (FixedKLController(beta) if cfg.target is None
                      else AdaptiveKLController(beta, cfg.target, cfg.horizon))
        return cls(controller, cfg.estimator, cfg.use_loss)

    @property
    def beta(self) -> float:
        return self.controller.value

    @property
    def in_reward(self) -> float:
        """β for the per-token reward (0 when the KL is a loss term instead)."""
        return 0.0 if self.in_loss else self.beta

    def loss(self, logp: Tensor, ref_logp: Tensor, mask: Tensor, agg: Aggregation,
             norm: Normaliser) -> Tensor | None:
        """β·agg(KL) when the KL is a loss term (and β > 0), else None."""
        if not self.in_loss or self.beta <= 0:
            return None
        return self.beta * kl_loss(logp, ref_logp, mask, estimator=self.estimator, agg=agg,
                                   norm=norm)

    def update(self, measured_kl: float, n_samples: int) -> None:
        """Adapt β after a step (no-op when fixed)."""
        self.controller.update(measured_kl, n_samples)
