"""Which models an RL run uses, and where they live (OpenRLHF's colocation keys).

Roles: `actor` (policy: trainer + generation engine), `ref` (frozen reference), `critic`
(value model, PPO only) and `reward` (reward sources). A host is one process — a Ray actor,
or the driver inline — holding one or more roles; colocating roles saves memory and copies.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from alignflow.errors import ConfigError, require

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


@dataclass(frozen=True, kw_only=True)
class RoleResources:
    """GPUs of one role (OpenRLHF's `<role>.num_nodes`, `<role>.num_gpus_per_node`)."""

    num_nodes: int = field(default=1, metadata={"help": "nodes of the role's group"})
    num_gpus_per_node: int = field(default=0, metadata={
        "help": "GPUs per node for the role (0: CPU; OpenRLHF's default is 8)"})

    def __post_init__(self) -> None:
        require(self.num_nodes >= 1, "num_nodes", "an integer >= 1", self.num_nodes)
        require(self.num_gpus_per_node >= 0, "num_gpus_per_node", "an integer >= 0",
                self.num_gpus_per_node)

    @property
    def gpus(self) -> int:
        return self.num_nodes * self.num_gpus_per_node


def host_gpus(role_gpus: dict[str, int], placement: PlacementConfig) -> float:
    """GPUs of a host holding roles with these GPU counts; `placement.num_gpus` if none ask.

    A host is one process driving one device; roles colocated on it share that GPU."""
    asked = {role: n for role, n in role_gpus.items() if n > 0}
    if not asked:
        return placement.num_gpus
    many = {role: n for role, n in asked.items() if n > 1}
    if many:
        role, n = next(iter(many.items()))
        raise ConfigError(f"{role}.num_nodes x {role}.num_gpus_per_node = {n}: a role runs in "
                          "one process on one GPU until data-parallel roles land (issue 11); "
                          "expected 1 GPU per role (or 0 for CPU)")
    return 1.0


def check_gpus(needed: float, what: str) -> None:
    """Refuse a GPU request the cluster (or, without Ray, this machine) cannot meet: Ray
    would otherwise wait forever for resources that never come."""
    if needed <= 0:
        return
    import ray

    if ray.is_initialized():
        have = float(ray.cluster_resources().get("GPU", 0))
    else:
        import torch

        have = float(torch.cuda.device_count())
    if have < needed:
        raise ConfigError(f"{what} asks for {needed:g} GPU(s); this cluster has {have:g}. "
                          "Expected GPU counts of 0 (CPU) or a cluster with GPUs")
