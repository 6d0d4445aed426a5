"""Rewards for RL: rules, Python reward functions, remote and local reward models.

Importable without Ray. Every source has `score(queries, prompts, labels) -> RewardOutput`
(OpenRLHF's convention: query = prompt + response). `build_reward(RewardConfig(...))`
turns spec strings into one combined source; heavy imports (transformers) happen only
when a model source is built.

Names are imported on first use, so importing one torch-free module of the package
(a config section, a name list) imports no torch."""

from __future__ import annotations

import importlib

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


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
