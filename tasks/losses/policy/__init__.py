"""PPO-family actor and critic losses on (B, T) per-token log-probs with an action mask.

Every policy-loss variant has one signature (`knobs.Surrogate`): `variants.py` (PPO, GSPO,
CISPO, SAPO, GMPO, GPG, DPPO), `covariance.py` (Clip-Cov, KL-Cov), built on the clipped
surrogate of `clipped.py`; `loss.py` is the one entry (`policy_loss`) with the registry."""

from __future__ import annotations

from alignflow.tasks.losses.policy.clipped import (
    clipped_surrogate,
    dual_clip_tokens,
    gspo_tokens,
    importance_ratio,
    ppo_clip_tokens,
    sequence_ratio,
)
from alignflow.tasks.losses.policy.knobs import PolicyLossKnobs, Surrogate
from alignflow.tasks.losses.policy.loss import (
    POLICY_LOSSES,
    SEQUENCE_LEVEL,
    kl_loss,
    policy_loss,
    policy_metrics,
    value_loss,
)

__all__ = ["POLICY_LOSSES", "SEQUENCE_LEVEL", "PolicyLossKnobs", "Surrogate", "clipped_surrogate",
           "dual_clip_tokens", "gspo_tokens", "importance_ratio", "kl_loss", "policy_loss",
           "policy_metrics", "ppo_clip_tokens", "sequence_ratio", "value_loss"]
