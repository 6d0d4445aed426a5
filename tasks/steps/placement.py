"""Which models an RL run uses, and where they live (OpenRLHF's placement flags).

Roles: `actor` (policy: trainer + generation engine), `ref` (frozen reference), `critic`
(value model, PPO only) and `reward` (reward sources). A host is one process — a Ray actor,
or the driver inline — holding one or more roles; colocating roles saves memory and copies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from alignflow.errors import ConfigError

Role = Literal["actor", "ref", "critic", "reward"]


@dataclass(frozen=True, kw_only=True)
class PlacementConfig:
    """Roles → hosts. With `colocate_all_models` every role shares one host (the CPU default)."""

    colocate_all_models: bool = True
    colocate_actor_ref: bool = True
    colocate_critic_reward: bool = True
    num_cpus: float = 1.0
    num_gpus: float = 0.0
    offload_idle: bool = False

    def __post_init__(self) -> None:
        if self.num_cpus < 0 or self.num_gpus < 0:
            raise ConfigError(f"placement.num_cpus={self.num_cpus}, num_gpus={self.num_gpus}: "
                              f"expected numbers >= 0")

    def hosts(self, roles: tuple[Role, ...]) -> dict[str, tuple[Role, ...]]:
        """Host name → the roles it holds, for the roles a flow uses."""
        if self.colocate_all_models:
            return {"models": roles}
        groups: dict[str, list[Role]] = {}
        for role in roles:
            groups.setdefault(self._host_name(role), []).append(role)
        return {name: tuple(rs) for name, rs in groups.items()}

    def host_of(self, role: Role) -> str:
        return "models" if self.colocate_all_models else self._host_name(role)

    def _host_name(self, role: Role) -> str:
        if role == "ref" and self.colocate_actor_ref:
            return "actor"
        if role == "reward" and self.colocate_critic_reward:
            return "critic"
        return role
