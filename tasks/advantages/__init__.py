"""Advantage estimators and reward shaping, pure torch (no Ray, vLLM or transformers).

Names are imported on first use (`alignflow/lazy.py`)."""

from __future__ import annotations

from alignflow.lazy import exports

_EXPORTS = {
    "ESTIMATORS": "estimators",
    "GROUP_ESTIMATORS": "estimators",
    "AdvantageConfig": "estimators",
    "Advantages": "estimators",
    "Estimator": "estimators",
    "RolloutBatch": "estimators",
    "compute_advantages": "estimators",
    "dr_grpo": "estimators",
    "gae": "estimators",
    "gae_estimator": "estimators",
    "group_mean_baseline": "estimators",
    "group_norm": "estimators",
    "group_normalize": "estimators",
    "leave_one_out": "estimators",
    "reinforce": "estimators",
    "reinforce_baseline": "estimators",
    "rloo": "estimators",
    "RunningMoments": "normalize",
    "whiten": "normalize",
    "LengthPenalty": "shaping",
    "compute_token_rewards": "shaping",
    "discounted_returns": "shaping",
    "last_valid_index": "shaping",
    "overlong_penalty": "shaping",
}
__all__ = sorted(_EXPORTS)

__getattr__ = exports(__name__, _EXPORTS)
