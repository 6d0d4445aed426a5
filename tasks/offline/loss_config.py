"""The model sections of the offline objectives that have loss knobs. OpenRLHF 0.11 keeps
them under `model.*` (`model.beta`, `model.ipo_enable`, `model.loss_type`), so each such
objective's `model` section is the shared one plus its knobs; the train task reads them as
`TrainSpec.loss`.

`DPOModelConfig` is the one DPO section: the `dpo` flow and the iterative-DPO loop both use
it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import get_args

from alignflow.errors import require
from alignflow.tasks.losses.names import DPOVariant, RewardLossName
from alignflow.tasks.modeling.model_config import ModelConfig, SFTModelConfig


@dataclass(frozen=True, kw_only=True)
class DPOModelConfig(ModelConfig):
    """DPO (sigmoid), IPO (`ipo_enable` or `loss_type=ipo`) or cDPO (`label_smoothing` > 0).

    beta: strength of the implicit KL to the reference
    ipo_enable: the IPO loss (same as loss_type=ipo)
    label_smoothing: cDPO's share of flipped labels, in [0, 0.5)
    loss_type: sigmoid | ipo | cdpo (alignflow; OpenRLHF picks by the two keys above)
    nll_loss_coef: weight of the chosen responses' mean token NLL added to the loss (0: off)
    """

    beta: float = 0.1
    ipo_enable: bool = False
    label_smoothing: float = 0.0
    loss_type: DPOVariant = "sigmoid"
    nll_loss_coef: float = 0.0

    def __post_init__(self) -> None:
        require(math.isfinite(self.beta) and self.beta > 0, "beta", "a finite float > 0",
                self.beta)
        require(math.isfinite(self.nll_loss_coef) and self.nll_loss_coef >= 0, "nll_loss_coef",
                "a finite float >= 0", self.nll_loss_coef)
        require(0.0 <= self.label_smoothing < 0.5, "label_smoothing", "a float in [0, 0.5)",
                self.label_smoothing)
        require(self.loss_type in get_args(DPOVariant), "loss_type",
                f"one of {get_args(DPOVariant)}", self.loss_type)

    @property
    def dpo_variant(self) -> DPOVariant:
        """cDPO when label smoothing is set on the sigmoid loss (OpenRLHF's convention)."""
        if self.ipo_enable:
            return "ipo"
        if self.loss_type == "sigmoid" and self.label_smoothing > 0:
            return "cdpo"
        return self.loss_type


@dataclass(frozen=True, kw_only=True)
class KTOModelConfig(ModelConfig):
    """KTO: β and the weights of desirable (chosen) and undesirable (rejected) examples."""

    beta: float = 0.01
    desirable_loss_weight: float = 1.0
    undesirable_loss_weight: float = 1.0

    def __post_init__(self) -> None:
        require(math.isfinite(self.beta) and self.beta > 0, "beta", "a finite float > 0",
                self.beta)
        for name in ("desirable_loss_weight", "undesirable_loss_weight"):
            value = getattr(self, name)
            require(math.isfinite(value) and value > 0, name, "a finite float > 0", value)


@dataclass(frozen=True, kw_only=True)
class RMModelConfig(ModelConfig):
    """Pairwise reward-model loss on the value head's last-token score.

    loss_type: sigmoid (-log σ(r_c - r_r - m)) or logexp (log(1 + e^(r_r - r_c + m)))
    margin: a constant margin m (alignflow; null: none)
    margin_loss_enable: each pair's margin from the data set's `margin` column (0 where absent) in the sigmoid loss, as OpenRLHF (its logexp loss takes none); added to margin
    """

    loss_type: RewardLossName = "sigmoid"
    margin: float | None = None
    margin_loss_enable: bool = False

    def __post_init__(self) -> None:
        require(self.loss_type in get_args(RewardLossName), "loss_type",
                f"one of {get_args(RewardLossName)}", self.loss_type)
        if self.margin is not None:
            require(math.isfinite(self.margin), "margin", "a finite float or null", self.margin)


@dataclass(frozen=True, kw_only=True)
class DistillModelConfig(SFTModelConfig):
    """The student, and the weight of the distillation term (OpenRLHF's `--kd_coef`):
    (1 − kd_coef)·CE + kd_coef·KL(teacher‖student)."""

    kd_coef: float = field(default=0.4, metadata={
        "help": "weight of the distillation (KL) term, in [0, 1]; the CE term gets the rest"})

    def __post_init__(self) -> None:
        require(0.0 <= self.kd_coef <= 1.0, "kd_coef", "a float in [0, 1]", self.kd_coef)
