"""KL-penalty coefficient controllers (Ziegler et al. 2019, "Fine-Tuning LMs from Human
Preferences", §2.2). `value` is β for the current step; `update` runs once per step."""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.errors import ConfigError


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
