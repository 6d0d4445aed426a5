"""The `agent` section: the limits of a multi-turn episode (alignflow's keys; the file is
OpenRLHF's `train.agent_func_path`)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from alignflow.errors import require


@dataclass(frozen=True, kw_only=True)
class AgentConfig:
    """Multi-turn episodes: the policy acts, the environment answers, up to `max_turns`."""

    max_turns: int = field(default=4, metadata={"help": "policy turns per episode at most"})
    max_length: int = field(default=1024, metadata={
        "help": "tokens per episode at most (prompt, actions, feedback); each turn also "
                "stops at rollout.max_new_tokens new tokens"})
    step_timeout: float = field(default=60.0, metadata={
        "help": "seconds an environment's reset or step may take"})

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_length"):
            require(getattr(self, name) >= 1, name, "an integer >= 1", getattr(self, name))
        require(math.isfinite(self.step_timeout) and self.step_timeout > 0, "step_timeout", "a number of seconds > 0",
                self.step_timeout)
