"""Advantage estimators and reward shaping, pure torch (no Ray, vLLM or transformers).

Names are imported on first use, so importing one torch-free module of the package
(a config section, a name list) imports no torch."""

from __future__ import annotations

import importlib

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


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
