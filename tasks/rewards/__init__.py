"""Rewards for RL: rules, Python reward functions, remote and local reward models.

Importable without Ray. Every source has `score(queries, prompts, labels) -> RewardOutput`
(OpenRLHF's convention: query = prompt + response). `build_reward(RewardConfig(...))`
turns spec strings into one combined source; heavy imports (transformers) happen only
when a model source is built.

Names are imported on first use (`alignflow/lazy.py`)."""

from __future__ import annotations

from alignflow.lazy import exports

_EXPORTS = {
    "RewardOutput": "base",
    "RewardSource": "base",
    "CombinedReward": "combine",
    "filter_groups": "combine",
    "RewardConfig": "registry",
    "build_reward": "registry",
    "build_source": "registry",
}
__all__ = sorted(_EXPORTS)

__getattr__ = exports(__name__, _EXPORTS)
