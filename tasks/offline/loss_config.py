"""The loss sections of the offline objectives, one per objective that has knobs.

`DPOLossConfig` is the one DPO section: the `dpo` flow and the iterative-DPO loop both use
it (OpenRLHF's `--beta`, `--ipo`, `--label_smoothing`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.errors import ConfigError
from alignflow.tasks.losses.preference import DPOVariant
from alignflow.tasks.losses.reward_model import RewardLossName


@dataclass(frozen=True, kw_only=True)
class DPOLossConfig:
    """DPO (sigmoid), IPO (`ipo` or `loss_type=ipo`) or cDPO (`label_smoothing` > 0)."""

    beta: float = 0.1
    loss_type: DPOVariant = field(default="sigmoid", metadata={"help": "sigmoid | ipo | cdpo"})
    ipo: bool = field(default=False, metadata={"help": "OpenRLHF's --ipo: loss_type=ipo"})
    label_smoothing: float = 0.0

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ConfigError(f"loss.beta={self.beta}: expected > 0")
        if not 0.0 <= self.label_smoothing < 0.5:
            raise ConfigError(f"loss.label_smoothing={self.label_smoothing}: expected [0, 0.5)")

    @property
    def dpo_variant(self) -> DPOVariant:
        """cDPO when label smoothing is set on the sigmoid loss (OpenRLHF's convention)."""
        if self.ipo:
            return "ipo"
        if self.loss_type == "sigmoid" and self.label_smoothing > 0:
            return "cdpo"
        return self.loss_type


@dataclass(frozen=True, kw_only=True)
class KTOLossConfig:
    """KTO: β and the weights of desirable (chosen) and undesirable (rejected) examples."""

    beta: float = 0.1
    desirable_weight: float = 1.0
    undesirable_weight: float = 1.0

    def __post_init__(self) -> None:
        if self.beta <= 0:
            raise ConfigError(f"loss.beta={self.beta}: expected > 0")


@dataclass(frozen=True, kw_only=True)
class RMLossConfig:
    """Pairwise reward-model loss on the value head's last-token score."""

    rm_loss: RewardLossName = field(default="sigmoid", metadata={"help": "sigmoid | logexp"})
    margin: float | None = field(default=None, metadata={"help": "constant margin"})


@dataclass(frozen=True, kw_only=True)
class KDLossConfig:
    """Distillation: α·CE + (1−α)·KL(teacher‖student)."""

    kd_alpha: float = field(default=0.5, metadata={"help": "weight of the CE term"})

    def __post_init__(self) -> None:
        if not 0.0 <= self.kd_alpha <= 1.0:
            raise ConfigError(f"loss.kd_alpha={self.kd_alpha}: expected a float in [0, 1]")
