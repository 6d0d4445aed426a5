"""The names a config chooses loss variants by: read by config sections (and so by the
driver), apart from the torch code that implements each (`aggregate.py`, `kl.py`,
`is_correction.py`, `policy.py`, `preference.py`, `reward_model.py`)."""

from __future__ import annotations

from typing import Literal

Aggregation = Literal["token-mean", "seq-mean-token-mean", "seq-mean-token-sum-norm"]
KLEstimator = Literal["k1", "k2", "k3"]
ISCorrection = Literal["tis", "icepop", "seq-mask-tis"]
PolicyLossName = Literal["ppo", "dual_clip", "gspo"]
DPOVariant = Literal["sigmoid", "ipo", "cdpo"]
RewardLossName = Literal["sigmoid", "logexp"]
