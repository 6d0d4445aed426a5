"""Ray actors and placement groups that outlive the process that made them, found again by
name: a supervised run's workers (`flows/ray/adopt.py`) and the helpers a worker starts
(a data-parallel host's generation engines, `tasks/engines/vllm/actor.py`).

They live in the `alignflow` namespace, named after the run ("alignflow:<run>:<host>…").
A worker of a supervised group is told its group's name (`own`); what it starts to outlive
it is named after the group (`helper_names`), detached, and started again by Ray when its
process or node is lost (`helper_options`), so the worker's replacement takes it over
(`take_over`) instead of starting it and loading its model again. Whatever ends the run
removes them (`sweep`). A leaf: it imports only Ray, when called.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

NAMESPACE = "alignflow"
HELPER_RESTARTS = 3  # Ray starts a lost helper again (on a live node) this often
_OWNER: list[str] = []  # this worker process's group, "alignflow:<run>:<host>" (supervised)


def find(name: str) -> Any:
    """The live actor called `name` in the namespace, or None."""
    import ray

    try:
        return ray.get_actor(name, namespace=NAMESPACE)
    except ValueError:
        return None


def answering(actors: list[Any], timeout: float = 20.0, method: str = "pid") -> bool:
    """Whether every actor answers a call of `method` (a rank on a lost node does not)."""
    import ray

    try:
        ray.get([getattr(a, method).remote() for a in actors], timeout=timeout)
        return True
    except Exception:
        return False


def not_alive(actors: dict[Any, Any]) -> set[Any]:
    """The keys of `actors` ({key: handle}) whose actor Ray's control store no longer holds
    alive: dead, or being started again (it knows within milliseconds of a lost process,
    where a caller's pending call learns it only after a second or more, and a call sent
    meanwhile waits for the restart). Ray keeps this table in a private module: where it
    cannot be read, nothing is reported and callers wait as they did without it."""
    try:
        from ray._private import state
    except ImportError:
        return set()
    gone = set()
    for key, actor in actors.items():
        try:
            if state.state.actor_table(actor._actor_id.hex())["State"] != "ALIVE":
                gone.add(key)
        except Exception:  # an unreadable row: not evidence of a loss
            continue
    return gone


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

    for pg_id, info in placement_group_table().items():
        if info.get("name") == name and info.get("state") != "REMOVED":
            return _group(pg_id)
    return None


def _group(pg_id: str) -> Any:
    from ray._raylet import PlacementGroupID
    from ray.util.placement_group import PlacementGroup

    return PlacementGroup(PlacementGroupID.from_hex(pg_id))


def remove_pg(name: str) -> None:
    """Remove the detached placement group called `name`, if there is one."""
    pg = placement_group(name)
    if pg is not None:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(pg)


def own(group: str) -> None:
    """Record the supervised group this worker process belongs to ("" when the run is not
    supervised): what it starts to outlive it is named after the group."""
    _OWNER[:] = [group] if group else []


def helper_names(kind: str, count: int) -> list[str] | None:
    """Names for `count` helper actors of `kind` this worker starts, so that the process
    that replaces this one (the group formed again after a rank died) takes them over;
    None outside a supervised group (then they die with it)."""
    if not _OWNER:
        return None
    return [f"{_OWNER[0]}:{kind}:{i}" for i in range(count)]


def helper_options(name: str | None) -> dict:
    """Actor options of a helper called `name` (none when unnamed): detached, and started
    again by Ray when its process or node is lost, at once (while the worker that uses it
    is being replaced, or before its caller notices); a call it was running is run again
    on the restarted one, so the helper must tell a restart (`was_current_actor_
    reconstructed`) from a first start and refuse what its lost state would make wrong."""
    if not name:
        return {}
    return {"name": name, "lifetime": "detached", "namespace": NAMESPACE,
            "max_restarts": HELPER_RESTARTS, "max_task_retries": HELPER_RESTARTS}


def take_over(names: list[str], pg_name: str | None, *, timeout: float = 20.0,
              method: str = "pid",
              ready: Callable[[list[Any]], bool] | None = None) -> tuple[list[Any], Any] | None:
    """(actors, placement group) a replaced process left under `names` (and `pg_name`, when
    they have one), when every actor answers a call of `method` within `timeout` (a rank on
    a lost node does not), or passes `ready(actors)` where one is given; else None, with the
    leftovers gone and the names free."""
    actors = [find(n) for n in names]
    pg = placement_group(pg_name) if pg_name else None
    ready = ready or (lambda found: answering(found, timeout, method))
    if all(a is not None for a in actors) and (pg is not None or not pg_name) and ready(actors):
        return actors, pg
    discard(names)
    if pg is not None:
        from ray.util.placement_group import remove_placement_group

        remove_placement_group(pg)
    return None


def sweep(run_id: str) -> None:
    """Kill what a run left detached under its names and remove its placement groups: the
    run is over, nothing may keep a model resident."""
    import ray
    from ray.util import placement_group_table
    from ray.util.placement_group import remove_placement_group

    prefix = f"alignflow:{run_id}:"
    for entry in ray.util.list_named_actors(all_namespaces=True):
        if entry["namespace"] == NAMESPACE and entry["name"].startswith(prefix):
            actor = find(entry["name"])
            if actor is not None:
                ray.kill(actor, no_restart=True)
    for pg_id, info in placement_group_table().items():
        if (info.get("name") or "").startswith(prefix) and info.get("state") != "REMOVED":
            remove_placement_group(_group(pg_id))
