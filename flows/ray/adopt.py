"""Worker actors that outlive their driver (runs under `--supervise`): the driver restarted
next adopts them instead of starting processes and loading models again.

A supervised run's worker actors and their placement groups are detached
(`lifetime="detached"`, named after the run in the `alignflow` namespace), so the death of
its driver does not take them along. The driver the supervisor starts next finds them by
name and, when every rank answers, adopts them; the restore protocol then loads the newest
committed checkpoint into each before its next task, as for a fresh worker, so the run goes
on bitwise. A worker whose group has no committed checkpoint (nothing trained yet, or a
state that may be ahead of the journal) is never adopted: it is killed and started afresh.
Whatever ends a run (finished, failed, stopped) kills its workers as before; a supervisor
that gives up leaves them to the next `resume`, which adopts or kills them.
"""

from __future__ import annotations

import os
import time
from typing import Any

SUPERVISED_ENV = "ALIGNFLOW_SUPERVISED"  # set by the supervisor for the drivers it starts
NAMESPACE = "alignflow"


def supervised() -> bool:
    return bool(os.environ.get(SUPERVISED_ENV))


def actor_options() -> dict:
    """What a supervised run's worker actors are created with."""
    return {"lifetime": "detached", "namespace": NAMESPACE} if supervised() else {}


def pg_options() -> dict:
    return {"lifetime": "detached"} if supervised() else {}


def find(name: str) -> Any:
    """The live actor called `name` in the supervised namespace, or None."""
    import ray

    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None


def answering(actors: list[Any], timeout: float = 20.0) -> bool:
    """Whether every actor answers (a rank on a lost node does not)."""
    import ray

    try:
        ray.get([a.pid.remote() for a in actors], timeout=timeout)
        return True
    except Exception:
        return False


def discard(names: list[str]) -> None:
    """Kill the actors left under `names` and wait until the names are free."""
    import ray

    for name in names:
        actor = find(name)
        if actor is not None:
            ray.kill(actor, no_restart=True)
    deadline = time.time() + 30
    while time.time() < deadline and any(find(n) is not None for n in names):
        time.sleep(0.1)


def placement_group(name: str) -> Any:
    """The detached placement group called `name`, or None."""
    from ray.util import placement_group_table
    from ray.util.placement_group import PlacementGroup

    for pg_id, info in placement_group_table().items():
        if info.get("name") == name and info.get("state") != "REMOVED":
            from ray._raylet import PlacementGroupID

            return PlacementGroup(PlacementGroupID.from_hex(pg_id))
    return None


def adopt_actor(name: str) -> Any:
    """The actor a dead driver left under `name` when it answers; else None (and the name
    free)."""
    if not supervised():
        return None
    actor = find(name)
    if actor is not None and answering([actor]):
        return actor
    discard([name])
    return None


def adopt_ranks(names: list[str], pg_name: str) -> tuple[list[Any], Any] | None:
    """A dead driver's group: (actors, placement group) when every rank answers; else None
    (its leftovers killed, its placement group removed)."""
    if not supervised():
        return None
    actors = [find(n) for n in names]
    pg = placement_group(pg_name)
    if pg is not None and all(a is not None for a in actors) and answering(actors):
        return actors, pg
    discard(names)
    remove_pg(pg_name)
    return None


def remove_pg(name: str) -> None:
    """Remove the detached placement group called `name`, if there is one."""
    pg = placement_group(name)
    if pg is not None:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(pg)
