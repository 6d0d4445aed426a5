"""The advantage estimators' names (`algo.advantage.estimator`): read by config sections
(and so by the driver), apart from the torch code of each (`estimators.py`)."""

from __future__ import annotations

from typing import Literal

Estimator = Literal["gae", "reinforce", "reinforce_baseline", "group_norm", "dr_grpo", "rloo",
                    "flash_reinforce", "on_policy_distill"]
