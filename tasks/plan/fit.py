"""Whether a cluster holds a run's plan, decided as Ray would place it: every worker group
is one placement group (one bundle per node it spans, on distinct nodes when it spans
several: `flows/ray/groups.py`), every vLLM engine in actors one bundle of its tensor-parallel
GPUs on one node (`tasks/engines/vllm/placement.py`), hybrid engines inside their host's
GPUs. A plan Ray cannot place would wait for its GPUs until a timeout; it is refused before
anything starts, in one line naming the numbers.

Bundles are placed largest first, each on the node it fills best (first-fit decreasing):
for the few groups of a run this finds a placement whenever Ray's scheduler would.
"""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.tasks.engines.vllm.placement import CPU_ENGINE_RAY_CPUS, engine_bundle
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.hosts import HostPlan, VLLMEngines

EPS = 1e-9


@dataclass(frozen=True)
class Group:
    """One placement group: its bundles (GPUs, CPUs), on distinct nodes when `spread`."""

    name: str
    bundles: tuple[tuple[float, float], ...]
    spread: bool = False

    @property
    def gpus(self) -> float:
        return sum(g for g, _ in self.bundles)


def host_group(host: HostPlan) -> Group:
    per_node = (host.workers_per_node * host.gpus_per_worker,
                host.workers_per_node * host.cpus_per_worker)
    return Group(f"host {host.name}", (per_node,) * host.nodes, spread=host.nodes > 1)


def engine_groups(engines: VLLMEngines | None) -> list[Group]:
    """The engines' own placement groups (none for hybrid engines)."""
    if engines is None or engines.hybrid:
        return []
    on_gpu = engines.gpus_each > 0
    bundle = engine_bundle(on_gpu=on_gpu, tensor_parallel_size=engines.tensor_parallel,
                           cpus=1.0 if on_gpu else CPU_ENGINE_RAY_CPUS)
    return [Group(f"vLLM engine {i}", ((bundle.get("GPU", 0.0), bundle["CPU"]),))
            for i in range(engines.count)]


def problem(groups: list[Group], cluster: Cluster) -> str | None:
    """Why `cluster` cannot hold `groups`, or None when it can. CPUs count on a GPU cluster
    that states them; on a CPU machine the hosts share its cores (one machine's warm
    workers reserve none: `flows/ray/pool.py`)."""
    counted = cluster.cpus_per_node if cluster.gpus > 0 else None
    free: list[tuple[float, float | None]] = [(float(cluster.gpus_per_node), counted)
                                              for _ in range(cluster.nodes)]
    for group in sorted(groups, key=lambda g: (-max(b[0] for b in g.bundles), -g.gpus)):
        if group.spread and len(group.bundles) > cluster.nodes:
            return (f"{group.name} spreads over {len(group.bundles)} nodes; the cluster has "
                    f"{cluster.nodes}")
        taken: set[int] = set()
        for gpus, cpus in sorted(group.bundles, reverse=True):
            node = _best(free, gpus, cpus, taken if group.spread else set())
            if node is None:
                return (f"{group.name} needs a node with {gpus:g} GPU(s)"
                        + ("" if counted is None else f" and {cpus:g} CPU(s)")
                        + " free and none has them (free per node then: "
                        + ", ".join(_room(g, c) for g, c in free) + ")")
            taken.add(node)
            left_gpus, left_cpus = free[node]
            free[node] = (left_gpus - gpus, None if left_cpus is None else left_cpus - cpus)
    return None


def _room(gpus: float, cpus: float | None) -> str:
    return f"{gpus:g} GPU(s)" + ("" if cpus is None else f" {cpus:g} CPU(s)")


def _best(free: list[tuple[float, float | None]], gpus: float, cpus: float, taken: set[int]) -> int | None:
    """The node that fits the bundle with the least room to spare."""
    fits = [i for i, (g, c) in enumerate(free) if i not in taken and g + EPS >= gpus
            and (c is None or c + EPS >= cpus)]
    return min(fits, key=lambda i: (free[i][0], free[i][1] or 0.0, i), default=None)


def hybrid_problem(engines: VLLMEngines | None, host: HostPlan | None) -> str | None:
    """Hybrid engines use their host's GPUs: all of them together, and each engine's
    tensor-parallel GPUs on one node."""
    if engines is None or not engines.hybrid or host is None or host.gpus == 0:
        return None
    per_node = host.workers_per_node * host.gpus_per_worker
    if engines.gpus_used > host.gpus + EPS:
        return (f"the hybrid vLLM engines ({engines.count} × tensor parallel "
                f"{engines.tensor_parallel}) need {engines.gpus_used:g} GPU(s) of host "
                f"{host.name}, which has {host.gpus:g}")
    if engines.tensor_parallel > per_node + EPS:
        return (f"a hybrid vLLM engine's {engines.tensor_parallel} tensor-parallel GPUs must "
                f"share a node; host {host.name} has {per_node:g} per node")
    return None


def shared_gpus(host: HostPlan) -> str | None:
    """Data-parallel ranks at a fraction of a GPU each would share GPUs (Ray packs a node's
    fractions onto one), and NCCL refuses two ranks of one group on one GPU."""
    if host.workers > 1 and 0 < host.gpus_per_worker < 1:
        return (f"host {host.name}: {host.workers} data-parallel workers at "
                f"{host.gpus_per_worker:g} GPU each would share GPUs, and NCCL refuses two ranks "
                "of one group on one GPU; expected placement.num_gpus=1 (or 0)")
    return None

