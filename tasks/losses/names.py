"""The names a config chooses loss variants by: read by config sections (and so by the
driver), apart from the torch code that implements each (`aggregate.py`, `kl.py`,
`is_correction.py`, `policy.py`, `preference.py`, `reward_model.py`)."""

from __future__ import annotations

from typing import Literal

Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
KLEstimator = Literal["k1", "k2", "k3"]
ISCorrection = Literal["tis", "icepop", "seq-mask-tis"]
PolicyLossType = Literal["ppo", "gspo", "cispo", "sapo", "gmpo", "gpg", "clip_cov", "kl_cov",
                         "dppo_tv", "dppo_kl"]  # `actor.policy_loss_type`
PolicyLossName = Literal[PolicyLossType, "dual_clip"]  # the registry's (ppo + actor.dual_clip)
# peers' names of the same losses (veRL's `loss_mode`), read as alignflow's
POLICY_LOSS_SPELLINGS = {"vanilla": "ppo", "geo_mean": "gmpo"}
ISGating = Literal["ratio", "binary_kl", "tv"]
DPOVariant = Literal["sigmoid", "ipo", "cdpo"]
RewardLossName = Literal["sigmoid", "logexp"]
