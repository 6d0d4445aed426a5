"""Stateful worker groups: a Ray actor (or, inline, an object) holding e.g. a policy model.

`worker_group("policy", make_policy, num_cpus=1)` inside a flow creates the group (or
re-attaches to it); tasks declared `@task(worker="policy")` then run inside it and get the
object as their first argument. Restore protocol: a worker task whose output carries a
`checkpoint` (field or key, a store path) records it in its manifest; on resume the engine
remembers the newest committed checkpoint per group and, before the group's first *live*
task, calls `obj.restore(store, checkpoint)` — a method the worker object implements.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from alignflow.errors import FlowError
from alignflow.flows.engine import current_driver


def worker_group(name: str, factory: Callable[[], Any], *, num_cpus: float = 1,
                 num_gpus: float = 0, memory: int | None = None, label: str = "") -> str:
    """Declare worker group `name` built by `factory()`; returns the name for `@task(worker=)`.
    `label` (e.g. the roles it holds) is shown on the run's progress line."""
    driver = current_driver()
    if driver is None:
        raise FlowError(f"worker_group({name!r}) needs a running flow; call it inside a @flow")
    driver.add_worker_group(name, factory, {"num_cpus": num_cpus, "num_gpus": num_gpus,
                                            "memory": memory, "label": label})
    return name
