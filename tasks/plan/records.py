"""The run plan: which processes a run needs, where they go and on what — and what a
resumed run may change of it.

Decided once, right after the config resolves (`build.py`), recorded in run.json, shown by
`--dry-run` (`table.py`), compared on resume (`RunPlan.follow`), and read by everything
that places or builds anything. Frozen and journal-able (its parts: `hosts.py`).

On resume every trained role is restored from its newest committed checkpoint, so what the
checkpoints were cut for must stay: a trained role that moved to another host (its host
restores it), or whose trainer backend, DeepSpeed world size or ZeRO stage, or LoRA
adapters differ, is refused in one line naming the difference. The rest (GPUs, engines,
the generator's resources, a PyTorch role's workers) is followed and said.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from alignflow.artifacts.journal import journal_record
from alignflow.artifacts.shared import ENV as SHARED_ENV
from alignflow.artifacts.shared import shared_across_nodes
from alignflow.errors import ConfigError
from alignflow.tasks.plan import fit
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.hosts import EnginePlan, HostPlan, TrainerPlan, VLLMEngines
from alignflow.tasks.plan.memory.report import MemoryPlan

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store

Executor = Literal["inline", "ray"]


@journal_record
@dataclass(frozen=True, kw_only=True)
class RunPlan:
    """The whole run: its hosts, the generator worker of asynchronous runs, the vLLM
    engines, and whether it needs Ray (`executor`, with the reason)."""

    cluster: Cluster
    hosts: tuple[HostPlan, ...]
    generator: HostPlan | None = None
    engines: VLLMEngines | None = None
    colocated: bool = True  # every role on one host (train.colocate_all)
    executor: Executor = "inline"
    executor_reason: str = ""
    memory: MemoryPlan | None = None  # every GPU's peak (`memory/`), where it was made

    @property
    def simulated(self) -> str | None:
        """`NxG` when the run is planned on a simulated cluster (fake GPUs here)."""
        c = self.cluster
        return f"{c.nodes}x{c.gpus_per_node}" if c.simulated else None

    @property
    def groups(self) -> tuple[HostPlan, ...]:
        """Every worker group: the hosts, then the generator."""
        return self.hosts + ((self.generator,) if self.generator else ())

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(r for h in self.hosts for r in h.roles)

    def host(self, name: str) -> HostPlan:
        found = next((h for h in self.groups if h.name == name), None)
        if found is None:
            raise KeyError(f"the run plan has no host {name!r}")
        return found

    def host_of(self, role: str) -> str:
        return next(h.name for h in self.hosts if role in h.roles)

    def trainer(self, role: str) -> TrainerPlan | None:
        return next((t for h in self.hosts if (t := h.trainer(role))), None)

    @property
    def generation(self) -> EnginePlan | None:
        """The engine every batch is sampled with (the generator's, else the actor host's)."""
        return next((h.engine for h in reversed(self.groups) if h.engine), None)

    @property
    def gpus(self) -> float:
        return sum(h.gpus for h in self.groups) + (self.engines.gpus if self.engines else 0)

    @property
    def gpus_per_node(self) -> float:
        """The run's GPUs over the nodes its widest host spans (each multi-node host puts
        `workers_per_node` workers on every node; the rest is spread over them)."""
        return self.gpus / max(h.nodes for h in self.groups)

    def check_fits(self) -> None:
        """Refuse a plan the cluster cannot hold, in one line naming the numbers: Ray would
        wait for the GPUs until a timeout (a vLLM engine 900 s), NCCL would refuse two ranks
        of a group on one GPU. All GPUs, then ranks sharing GPUs, hybrid engines within their
        host's GPUs, the placement groups as Ray places them (`fit.py`), then every GPU's
        memory where the plan carries a memory plan (`memory/`)."""
        why = self.fit_problem()
        if why is not None:
            raise ConfigError(why)

    def check_runnable(self) -> None:
        """`check_fits`, and refuse what this version plans but does not place (nothing
        today: hybrid engines with tensor parallelism run in Ray actors on the actor's GPUs,
        `engines/vllm/placement.py:hybrid_slots`)."""
        why = self.fit_problem()
        if why is not None:
            raise ConfigError(why)

    def unplaced(self) -> str | None:
        """What this version plans but does not place, as one line (None: nothing)."""
        return None

    def fit_problem(self) -> str | None:
        """Why the cluster cannot hold this plan, as one line; None when it can."""
        asked = f"the placement of {self._who()} asks for {_num(self.gpus)} GPU(s)"
        if self.gpus > self.cluster.gpus + 1e-9:
            fix = "GPU counts of 0 (CPU) or a cluster with GPUs" if not self.cluster.gpus \
                else "fewer workers or engines, or a larger cluster" + self._colocate_hint()
            return (f"{asked}; this cluster has {self.cluster.gpus} ({self._breakdown()}). "
                    f"Expected {fix}")
        why = next(filter(None, map(fit.shared_gpus, self.groups)), None) or \
            fit.hybrid_problem(self.engines, self.hosts[0]) or fit.problem(
            [fit.host_group(h) for h in self.groups] + fit.engine_groups(self.engines),
            self.cluster)
        if why is None:
            return self._memory_problem()
        return (f"{asked} ({self._breakdown()}), which does not fit "
                f"{self.cluster.describe()}: {why}. Expected fewer workers or engines, or "
                "a larger cluster")

    def _colocate_hint(self) -> str:
        """Roles apart on GPUs of their own (train.colocate_all unset or false, as OpenRLHF)
        can share the actor's instead."""
        apart = sum(1 for h in self.hosts if h.gpus > 0)
        return ", or train.colocate_all=true (every role on the actor's GPUs)" \
            if apart > 1 else ""

    def _memory_problem(self) -> str | None:
        """A GPU over its memory, refused only where every size is known: the GPU's given
        (`--gpu-memory`) and every model's read (`MemoryPlan.problem`); with an assumed
        80 GiB the peaks are recorded and said (the dry run's notes), never refused."""
        m = self.memory
        return None if m is None or m.assumed else m.problem()

    def _who(self) -> str:
        return ", ".join(self.roles) + (", the generator" if self.generator else "") + \
            (", the vLLM engines" if self.engines else "")

    def _breakdown(self) -> str:
        parts = [f"{h.name} {h.nodes}×{h.workers_per_node} × {_num(h.gpus_per_worker)}"
                 for h in self.groups if h.gpus]
        e = self.engines
        if e is not None and e.gpus_used:
            parts.append(f"vLLM engines {e.count} × {_num(e.gpus_each)}"
                         + (f" within host {self.hosts[0].name}" if e.hybrid else ""))
        return ", ".join(parts) or "no GPUs"

    def check_store(self, store: Store) -> None:
        """Refuse, in one line, a run over several nodes whose store is a path on each
        node's own disk: every node would write its part (DeepSpeed's rank shards, a
        host's checkpoints) to a different store (`artifacts/shared.py`); a simulated
        cluster's nodes share this machine's disk."""
        if self.cluster.nodes <= 1 or self.cluster.simulated or \
                shared_across_nodes(store.protocol, store.root):
            return  # (a simulated cluster's nodes are all this machine)
        raise ConfigError(
            f"this run spans a cluster of {self.cluster.nodes} nodes, but its store "
            f"{store.url} is a path on each node's own disk (DeepSpeed's rank shards and the "
            "hosts' checkpoints would land on different nodes); expected an s3:// store, or "
            f"a path on a shared filesystem (NFS, Lustre, ...: set {SHARED_ENV}=1 when it is "
            "one)")

    def engines_of(self, host: HostPlan) -> VLLMEngines | None:
        """The run's vLLM engines when `host` drives them."""
        return self.engines if self.engines and self.engines.host == host.name else None

    def follow(self, recorded: RunPlan) -> list[str]:
        """What changed since the plan a run recorded, one line each, where its checkpoints
        can follow; `ConfigError` naming the first change they cannot."""
        return follow(recorded, self)


def _num(value: float) -> str:
    return f"{value:g}" if math.isfinite(value) else str(value)


FIX = "start a new run from the exported model (alignflow export RUN --out DIR)"


def follow(recorded: RunPlan, now: RunPlan) -> list[str]:
    """The changes from `recorded` to `now` a resume follows, one line each; `ConfigError`
    naming the first one the checkpoints cannot follow."""
    for role in sorted(_trained(recorded) | _trained(now)):
        refusal = _refusal(role, recorded, now)
        if refusal:
            raise ConfigError(f"the run's plan changed in a way its checkpoints cannot follow: "
                              f"{refusal}; {FIX}")
    notes = [line for role in sorted(_trained(now)) for line in _trainer_notes(role, recorded,
                                                                                 now)]
    for name in dict.fromkeys(h.name for h in (*recorded.groups, *now.groups)):
        notes += _host_notes(name, _find(recorded, name), _find(now, name))
    if recorded.engines != now.engines:
        notes.append(f"vLLM engines: {_engines(recorded)} → {_engines(now)}")
    return notes


def _trained(plan: RunPlan) -> set[str]:
    return {t.role for h in plan.hosts for t in h.trainers}


def _find(plan: RunPlan, name: str) -> HostPlan | None:
    return next((h for h in plan.groups if h.name == name), None)


def _refusal(role: str, recorded: RunPlan, now: RunPlan) -> str | None:
    old, new = recorded.trainer(role), now.trainer(role)
    if old is None or new is None:
        return f"{role} is {'no longer' if new is None else 'now'} trained"
    if recorded.host_of(role) != now.host_of(role):
        return f"{role} moved from host {recorded.host_of(role)} to {now.host_of(role)}"
    if old.backend != new.backend:
        return (f"{role} trainer {old.backend} → {new.backend} (its checkpoint was written by "
                f"the {old.backend} trainer)")
    if old.backend == "deepspeed" and (old.world_size, old.ds.stage) != (new.world_size,
                                                                          new.ds.stage):
        return (f"{role} DeepSpeed world size {old.world_size} → {new.world_size}, ZeRO stage "
                f"{old.ds.stage} → {new.ds.stage} (optimizer shards are cut for one of each)")
    a, b = old.ds.lora, new.ds.lora
    if (a.enabled, a.rank, a.target_modules) != (b.enabled, b.rank, b.target_modules):
        return f"{role} LoRA rank {a.rank} → {b.rank} (the adapters do not fit)"
    return None


def _trainer_notes(role: str, recorded: RunPlan, now: RunPlan) -> list[str]:
    old, new = recorded.trainer(role), now.trainer(role)
    if old is None or new is None or old.world_size == new.world_size:
        return []
    return [f"{role} trains on {new.world_size} worker(s), was {old.world_size} "
            "(every rank loads the full weights and optimizer)"]


def _host_notes(name: str, old: HostPlan | None, new: HostPlan | None) -> list[str]:
    if old is None or new is None:
        return [f"host {name} {'added' if old is None else 'gone'}"]
    said = []
    for what, a, b in (("GPUs per worker", old.gpus_per_worker, new.gpus_per_worker),
                       ("CPUs per worker", old.cpus_per_worker, new.cpus_per_worker),
                       ("engine", _engine(old), _engine(new))):
        if a != b:
            said.append(f"host {name}: {what} {_shown(a)} → {_shown(b)}")
    return said


def _shown(value: float | str) -> str:
    return f"{value:g}" if isinstance(value, float) else value


def _engine(host: HostPlan) -> str:
    return host.engine.describe() if host.engine else "none"


def _engines(plan: RunPlan) -> str:
    e = plan.engines
    return "none" if e is None else f"{e.count} × tp{e.tensor_parallel} ({e.gpus_each:g} GPU each)"
