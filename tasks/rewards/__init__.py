"""Rewards for RL: rules, Python reward functions, remote and local reward models.

Importable without Ray. Every source has `score(queries, prompts, labels) -> RewardOutput`
(OpenRLHF's convention: query = prompt + response). `build_reward(RewardConfig(...))`
turns spec strings into one combined source; heavy imports (transformers) happen only
when a model source is built.
"""

from alignflow.tasks.rewards.base import RewardOutput, RewardSource
from alignflow.tasks.rewards.combine import CombinedReward, filter_groups
from alignflow.tasks.rewards.registry import RewardConfig, build_reward, build_source

__all__ = [
    "CombinedReward",
    "RewardConfig",
    "RewardOutput",
    "RewardSource",
    "build_reward",
    "build_source",
    "filter_groups",
]
