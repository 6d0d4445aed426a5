"""The placement keys a plan is made from (OpenRLHF's colocation and role keys).

Roles: `actor` (policy: trainer + generation engine), `ref` (frozen reference), `critic`
(value model, PPO only) and `reward` (reward sources). A host is one worker group — Ray
actors, or the driver inline — holding one or more roles; colocating roles saves memory
and copies. A host of several workers is a data-parallel group (`Workers`). What the run
gets from these keys is decided once, in its plan (`tasks/plan/build.py`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal, TypeGuard, get_args

from alignflow.errors import require

Role = Literal["actor", "ref", "critic", "reward"]
ROLES: tuple[Role, ...] = get_args(Role)
ALL_IN_ONE = "models"  # the host of colocated roles


def is_role(name: str) -> TypeGuard[Role]:
    """Whether a host's role `name` is one of RL's (an offline flow's hosts hold others)."""
    return name in ROLES


@dataclass(frozen=True, kw_only=True)
class Colocation:
    """Roles → hosts, as OpenRLHF's `train.colocate_*` (`cli/train_ppo_ray.py`).

    colocate_all: every role shares the actor's GPUs, the vLLM engines too (null: OpenRLHF's default, false, on a cluster with GPUs; on a machine without GPUs every role in one process unless colocate_actor_ref or colocate_critic_reward asks for a split, the CPU default)
    colocate_actor_ref: the reference lives with the actor, the other roles on their own hosts
    colocate_critic_reward: the reward sources live with the critic, the other roles on their own hosts (with colocate_all too, as OpenRLHF: critic and reward then share GPUs of their own)
    """

    colocate_all: bool | None = None
    colocate_actor_ref: bool = False
    colocate_critic_reward: bool = False

    @property
    def all_in_one(self) -> bool:
        """Every role on one host, read as on a machine without GPUs (`one_host`)."""
        return self.one_host(on_gpu=False)

    def one_host(self, *, on_gpu: bool) -> bool:
        """colocate_all as given; unset, OpenRLHF's default (roles apart) on a cluster with
        GPUs, and one host on CPU unless a pair flag asks for separate hosts."""
        if self.colocate_all is not None:
            return self.colocate_all
        return not (on_gpu or self.colocate_actor_ref or self.colocate_critic_reward)

    def hosts(self, roles: tuple[Role, ...], *, on_gpu: bool = False
              ) -> dict[str, tuple[Role, ...]]:
        """Host name → the roles it holds, for the roles a flow uses."""
        groups: dict[str, list[Role]] = {}
        critic = "critic" in roles
        for role in roles:
            groups.setdefault(self.host_of(role, on_gpu=on_gpu, critic=critic), []).append(role)
        return {name: tuple(rs) for name, rs in groups.items()}

    def host_of(self, role: Role, *, on_gpu: bool = False, critic: bool = True) -> str:
        """The host of `role`. With colocate_all, OpenRLHF's launcher gives critic and
        reward a placement group of their own when colocate_critic_reward is set too and
        the run has a critic (`critic`)."""
        if not self.one_host(on_gpu=on_gpu):
            return self._host_name(role)
        apart = self.colocate_all and self.colocate_critic_reward and critic
        return "critic" if apart and role in ("critic", "reward") else ALL_IN_ONE

    def _host_name(self, role: Role) -> str:
        if role == "ref" and self.colocate_actor_ref:
            return "actor"
        if role == "reward" and self.colocate_critic_reward:
            return "critic"
        return role


@dataclass(frozen=True, kw_only=True)
class Workers:
    """How many workers a role runs on (OpenRLHF's `<role>.num_nodes`, `num_gpus_per_node`).

    num_nodes: nodes the role's workers spread over (one placement bundle per node)
    num_gpus_per_node: workers per node, one per GPU; on CPU the number of worker processes per node (each reserves placement.num_cpus CPUs and placement.num_gpus GPUs)
    """

    num_nodes: int = 1
    num_gpus_per_node: int = 1

    def __post_init__(self) -> None:
        for name in ("num_nodes", "num_gpus_per_node"):
            require(getattr(self, name) >= 1, name, "an integer >= 1", getattr(self, name))
        parent = getattr(super(), "__post_init__", None)
        if parent is not None:
            parent()

    @property
    def workers(self) -> int:
        return self.num_nodes * self.num_gpus_per_node


@dataclass(frozen=True, kw_only=True)
class HostWorkers(Workers):
    """A host's layout, and the roles on it that asked for another (`beside`: role, its
    num_nodes, its num_gpus_per_node): every worker of a host holds all its roles."""

    beside: tuple[tuple[str, int, int], ...] = ()


def host_workers(roles: tuple[Role, ...], sections: Mapping[str, Workers]) -> HostWorkers:
    """The layout of a host holding `roles`: its trained role's (actor, else critic), else the
    largest of its roles'; colocated frozen roles run on every worker of the host. A role
    that asked for another layout (and holds a model) is named in `beside`: the plan says
    what OpenRLHF does with it instead (`table.size_notes`)."""
    trained = next((r for r in ("actor", "critic") if r in roles), None)
    chosen = sections[trained] if trained else max((sections[r] for r in roles),
                                                   key=lambda w: w.workers)
    beside = tuple((r, sections[r].num_nodes, sections[r].num_gpus_per_node) for r in roles
                   if getattr(sections[r], "holds_model", True) and
                   (sections[r].num_nodes, sections[r].num_gpus_per_node) !=
                   (chosen.num_nodes, chosen.num_gpus_per_node))
    return HostWorkers(num_nodes=chosen.num_nodes, num_gpus_per_node=chosen.num_gpus_per_node,
                       beside=beside)


@dataclass(frozen=True, kw_only=True)
class PlacementConfig:
    """Ray resources of each worker of a host (alignflow; OpenRLHF sets GPUs per role instead).

    num_cpus: CPUs reserved per worker
    num_gpus: GPUs reserved per worker (0: one per worker where the cluster has GPUs, none on a CPU cluster; a host without a model takes none)
    """

    num_cpus: float = 1.0
    num_gpus: float = 0.0

    def __post_init__(self) -> None:
        for name in ("num_cpus", "num_gpus"):
            value = getattr(self, name)
            require(math.isfinite(value) and value >= 0, name, "a finite number >= 0", value)


@dataclass(frozen=True, kw_only=True)
class GroupPlacement(Workers, PlacementConfig):
    """The training host of a flow without roles (offline training): its workers and the
    resources each reserves."""
