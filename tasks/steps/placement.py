"""Which models an RL run uses, and where they live (OpenRLHF's colocation keys).

Roles: `actor` (policy: trainer + generation engine), `ref` (frozen reference), `critic`
(value model, PPO only) and `reward` (reward sources). A host is one process — a Ray actor,
or the driver inline — holding one or more roles; colocating roles saves memory and copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from alignflow.errors import require

Role = Literal["actor", "ref", "critic", "reward"]


@dataclass(frozen=True, kw_only=True)
class Colocation:
    """Roles → hosts (OpenRLHF 0.11's `train.colocate_*`; alignflow colocates by default).

    colocate_all: every role shares one host (the CPU default)
    colocate_actor_ref: without colocate_all, the reference lives with the actor
    colocate_critic_reward: without colocate_all, the reward sources live with the critic
    """

    colocate_all: bool = True
    colocate_actor_ref: bool = True
    colocate_critic_reward: bool = True

    def hosts(self, roles: tuple[Role, ...]) -> dict[str, tuple[Role, ...]]:
        """Host name → the roles it holds, for the roles a flow uses."""
        if self.colocate_all:
            return {"models": roles}
        groups: dict[str, list[Role]] = {}
        for role in roles:
            groups.setdefault(self._host_name(role), []).append(role)
        return {name: tuple(rs) for name, rs in groups.items()}

    def host_of(self, role: Role) -> str:
        return "models" if self.colocate_all else self._host_name(role)

    def _host_name(self, role: Role) -> str:
        if role == "ref" and self.colocate_actor_ref:
            return "actor"
        if role == "reward" and self.colocate_critic_reward:
            return "critic"
        return role


@dataclass(frozen=True, kw_only=True)
class PlacementConfig:
    """Ray resources of each host (alignflow; OpenRLHF sets GPUs per role instead).

    num_cpus: CPUs reserved per host
    num_gpus: GPUs reserved per host
    """

    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self) -> None:
        for name in ("num_cpus", "num_gpus"):
            require(getattr(self, name) >= 0, name, "a number >= 0", getattr(self, name))
