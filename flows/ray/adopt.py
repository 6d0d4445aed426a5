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
from typing import Any

from alignflow.detached import NAMESPACE, take_over

SUPERVISED_ENV = "ALIGNFLOW_SUPERVISED"  # set by the supervisor for the drivers it starts


def supervised() -> bool:
    return bool(os.environ.get(SUPERVISED_ENV))


def actor_options() -> dict:
    """What a supervised run's worker actors are created with."""
    return {"lifetime": "detached", "namespace": NAMESPACE} if supervised() else {}


def pg_options() -> dict:
    return {"lifetime": "detached"} if supervised() else {}


def adopt_actor(name: str) -> Any:
    """The actor a dead driver left under `name` when it answers; else None (and the name
    free)."""
    found = take_over([name], None) if supervised() else None
    return found[0][0] if found else None


def adopt_ranks(names: list[str], pg_name: str) -> tuple[list[Any], Any] | None:
    """A dead driver's group: (actors, placement group) when every rank answers; else None
    (its leftovers killed, its placement group removed)."""
    return take_over(names, pg_name) if supervised() else None


def group_name(run_id: str, name: str) -> str:
    """The name a worker is told (`alignflow.detached.own`): its group's, when the run is
    supervised; "" otherwise."""
    return f"alignflow:{run_id}:{name}" if supervised() else ""
