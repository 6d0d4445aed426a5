"""An RL run whose reward sources were emptied on purpose is refused before it starts.

With no reward model, no remote URL and no source named, `reward.specs` falls back to the
default `rule:gsm8k`, which only fits gsm8k-shaped labels; a user who wrote
`--set reward.sources=[]` meant no reward, and the run trained on zeros and exited 0.
OpenRLHF cannot start without a reward either (train_ppo_ray: no `--remote_rm_url` builds a
reward model group from `--reward_pretrain`, and none fails). An agent's environment gives
rewards itself, so an agent run is not refused.
"""

from __future__ import annotations

from typing import Any

from alignflow.flows.config.build import Resolved
from alignflow.flows.config.lookup import value_at


def no_reward_problems(resolved: Resolved) -> list[str]:
    """One line when `reward.sources` was set empty and nothing else gives a reward."""
    cfg: Any = resolved.config
    reward = value_at(cfg, "reward")
    if reward is None or not hasattr(reward, "sources") or reward.sources \
            or "reward.sources" not in resolved.origins:
        return []
    if reward.model_name_or_path or reward.remote_url or value_at(cfg, "train.agent_func_path"):
        return []
    return [f"reward.sources = [] ({resolved.origins['reward.sources']}) leaves the run no "
            "reward: no reward model (--reward_pretrain), no remote reward (--remote_rm_url) "
            "and no source; name one, e.g. --set reward.sources=[rule:gsm8k] or a reward_func "
            ".py file (OpenRLHF does not start without a reward either)"]
