"""The trained roles of an RL run, under OpenRLHF 0.11's names: `actor.*` (the policy:
model, PPO clipping, extra loss terms, its own optimiser) and `critic.*` (the value model
of PPO: model, value clipping, its optimiser) and `ref.*`; each role with its worker count
(`num_nodes` × `num_gpus_per_node`, `steps.placement.Workers`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from alignflow.errors import require
from alignflow.tasks.losses.knobs import PolicyLossKnobs
from alignflow.tasks.losses.names import POLICY_LOSS_SPELLINGS, PolicyLossType
from alignflow.tasks.modeling.model_config import RefConfig
from alignflow.tasks.plan.placement import Workers
from alignflow.tasks.trainers.optim import AdamConfig, Optimizer

PolicyLossSpelling = Literal[PolicyLossType, "vanilla", "geo_mean"]


@dataclass(frozen=True, kw_only=True)
class ActorConfig(Workers, Optimizer):
    """The policy.

    model_name_or_path: HF name, local folder or offline name of the policy to train
    gradient_checkpointing_enable: recompute activations in backward (actor and critic)
    eps_clip: PPO clip range of the ratio, 1 ± eps_clip
    eps_clip_low_high: asymmetric clip (low, high), e.g. DAPO's 0.2 0.28; wins over eps_clip
    eps_clip_high: upper clip when eps_clip_low_high is not set (null: eps_clip)
    dual_clip: dual-clip bound c > 1 for negative advantages (null: off)
    entropy_coef: weight of the entropy bonus (null or 0: off)
    policy_loss_type: ppo (a ratio per token), gspo (the clip on the sequence's geometric-mean ratio, a mean per sequence), cispo (the clipped ratio as a detached weight on log π), sapo (a soft sigmoid gate instead of the clip), gmpo (geometric mean of clipped token ratios; veRL: geo_mean), gpg (plain −A·log π), clip_cov / kl_cov (clip or KL-penalise the tokens of largest advantage–log-prob covariance), dppo_tv / dppo_kl (drop tokens whose probability moved more than the clip bounds, by TV or binary KL); TRL's `loss_type` and veRL's names (vanilla = ppo) are read as these
    policy_loss: the variants' own knobs (SAPO's τ, Clip-Cov's and KL-Cov's shares, DPPO's ratio cap)
    """

    model_name_or_path: str = "smollm2-135m"
    gradient_checkpointing_enable: bool = False
    eps_clip: float = 0.2
    eps_clip_low_high: tuple[float, float] | None = None
    eps_clip_high: float | None = None
    dual_clip: float | None = None
    entropy_coef: float | None = None
    policy_loss_type: PolicyLossSpelling = "ppo"
    policy_loss: PolicyLossKnobs = field(default_factory=PolicyLossKnobs)

    def __post_init__(self) -> None:
        super().__post_init__()
        name = POLICY_LOSS_SPELLINGS.get(self.policy_loss_type, self.policy_loss_type)
        require(name in get_args(PolicyLossType), "policy_loss_type",
                f"one of {get_args(PolicyLossType)}", self.policy_loss_type)
        object.__setattr__(self, "policy_loss_type", name)
        require(math.isfinite(self.eps_clip) and self.eps_clip > 0, "eps_clip",
                "a finite float > 0", self.eps_clip)
        if self.eps_clip_low_high is not None:
            object.__setattr__(self, "eps_clip_low_high", tuple(self.eps_clip_low_high))
            require(all(math.isfinite(e) and e > 0 for e in self.eps_clip_low_high),
                    "eps_clip_low_high", "two finite floats > 0", self.eps_clip_low_high)
            require(self.eps_clip_high is None, "eps_clip_high",
                    "null when eps_clip_low_high is set (it sets both bounds)", self.eps_clip_high)
        if self.eps_clip_high is not None:
            require(math.isfinite(self.eps_clip_high) and self.eps_clip_high > 0,
                    "eps_clip_high", "a finite float > 0 or null", self.eps_clip_high)
        if self.dual_clip is not None:
            require(math.isfinite(self.dual_clip) and self.dual_clip > 1.0, "dual_clip",
                    "a finite float > 1 or null", self.dual_clip)
        if self.entropy_coef is not None:
            require(math.isfinite(self.entropy_coef) and self.entropy_coef >= 0,
                    "entropy_coef", "a finite float >= 0 or null", self.entropy_coef)

    @property
    def clip_bounds(self) -> tuple[float, float]:
        """(low, high): the ratio is clipped to [1 - low, 1 + high]."""
        if self.eps_clip_low_high is not None:
            return self.eps_clip_low_high
        return self.eps_clip, self.eps_clip_high or self.eps_clip


def _critic_adam() -> AdamConfig:
    return AdamConfig(lr=9e-6)


@dataclass(frozen=True, kw_only=True)
class CriticConfig(Workers, Optimizer):
    """The value model (PPO with GAE only).

    model_name_or_path: its initial weights; null: the first reward model (reward.model_name_or_path) unless reward.remote_url is given, else the actor's model (as OpenRLHF)
    value_clip: clip range of the value update around the old values
    freezing_steps: the actor is not updated in the first N iterations while the critic warms up (-1: off)
    save_value_network: export the trained critic as an HF folder too (runs/<id>/final/critic; with ckpt.output_dir copied to <output_dir>_critic)
    """

    adam: AdamConfig = field(default_factory=_critic_adam)
    model_name_or_path: str | None = None
    value_clip: float = 0.5
    freezing_steps: int = -1
    save_value_network: bool = False

    def __post_init__(self) -> None:
        super().__post_init__()
        require(math.isfinite(self.value_clip) and self.value_clip > 0, "value_clip",
                "a finite float > 0", self.value_clip)
        require(self.freezing_steps >= -1, "freezing_steps", "an integer >= -1",
                self.freezing_steps)


@dataclass(frozen=True, kw_only=True)
class RLRefConfig(Workers, RefConfig):
    """The frozen reference model of an RL run and its workers (when on its own host)."""
