"""Stateful worker groups: a Ray actor (or, inline, an object) holding e.g. a policy model.

`worker_group("policy", make_policy, num_cpus=1)` inside a flow creates the group (or
re-attaches to it); tasks declared `@task(worker="policy")` then run inside it and get the
object as their first argument. Restore protocol: a worker task whose output carries a
`checkpoint` (field or key, a store path) records it in its manifest; on resume the engine
remembers the newest committed checkpoint per group and, before the group's first *live*
task, calls `obj.restore(store, checkpoint)` — a method the worker object implements.

`num_nodes` × `workers_per_node` > 1 makes a data-parallel group (Ray executor only): one
actor per worker placed with a placement group, joined through the object's
`join_group(rank, world_size, master_addr, master_port)`; each of its tasks runs on every
rank and rank 0's result is committed (`flows/ray/groups.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from alignflow.errors import FlowError
from alignflow.flows.engine import current_driver


def worker_group(name: str, factory: Callable[[], Any], *, num_cpus: float = 1,
                 num_gpus: float = 0, memory: int | None = None, label: str = "",
                 num_nodes: int = 1, workers_per_node: int = 1,
                 immutable: bool = False) -> str:
    """Declare worker group `name` built by `factory()`; returns the name for `@task(worker=)`.
    Resources are per worker; several workers form a data-parallel group. `label` (e.g. the
    roles it holds) is shown on the run's progress line. `immutable`: nothing the object
    holds changes after it is built (a frozen reference or reward model), so under
    `--supervise` the live workers a dead driver left are taken over as they are."""
    driver = current_driver()
    if driver is None:
        raise FlowError(f"worker_group({name!r}) needs a running flow; call it inside a @flow")
    if num_nodes < 1 or workers_per_node < 1:
        raise FlowError(f"worker_group({name!r}): num_nodes={num_nodes}, workers_per_node="
                        f"{workers_per_node}; expected integers >= 1")
    driver.add_worker_group(name, factory, {"num_cpus": num_cpus, "num_gpus": num_gpus,
                                            "memory": memory, "label": label,
                                            "num_nodes": num_nodes,
                                            "workers_per_node": workers_per_node,
                                            "immutable": immutable})
    return name


def plan_group(host: Any, factory: Callable[[], Any]) -> str:
    """The worker group of one host of the run plan (a `tasks.plan.hosts.HostPlan`, read by
    its fields: the engine imports no `tasks`), placed and marked as the plan says."""
    return worker_group(host.name, factory, num_cpus=host.cpus_per_worker,
                        num_gpus=host.gpus_per_worker, label=host.label, num_nodes=host.nodes,
                        workers_per_node=host.workers_per_node, immutable=host.immutable)
