"""Worker actors that outlive their driver (runs under `--supervise`): the driver restarted
next adopts them instead of starting processes and loading models again.

A supervised run's worker actors and their placement groups are detached
(`lifetime="detached"`, named after the run in the `alignflow` namespace), so the death of
its driver does not take them along. The driver the supervisor starts next finds them by
name and, when every rank answers and none is left inside a call (`settle`: a call the
dead driver gave only some ranks is given to the rest), adopts them; the restore protocol
then loads the newest committed checkpoint into each before its next task, as for a fresh
worker, so the run goes on bitwise. A worker whose group has no committed checkpoint
(nothing trained yet, or a state that may be ahead of the journal) is never adopted: it is
killed and started afresh.
Whatever ends a run (finished, failed, stopped) kills its workers as before; a supervisor
that gives up leaves them to the next `resume`, which adopts or kills them.
"""

from __future__ import annotations

import os
import time
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


def adopt_ranks(names: list[str], pg_name: str) -> tuple[list[Any], Any, int] | None:
    """A dead driver's group: (actors, placement group, number of its last call) when every
    rank answers and none is left inside a call (`settle`); else None (its leftovers
    killed, its placement group removed)."""
    if not supervised():
        return None
    last: list[int | None] = [None]

    def ready(actors: list[Any]) -> bool:
        last[0] = settle(actors)
        return last[0] is not None

    found = take_over(names, pg_name, ready=ready)
    return (*found, last[0]) if found and last[0] is not None else None


def settle(actors: list[Any], timeout: float = 20.0) -> int | None:
    """The number of the last call of a dead driver's ranks once none runs one; None when a
    rank does not answer or they do not come to rest within `timeout`. A call the driver
    gave only some ranks (it died between them) would leave those waiting in its
    collectives for the others forever: it is given to the others too, so all finish it
    (its effects are undone by the restore before the next task; a rank runs a number once,
    so the dead driver's own copy, if still on its way, is not run twice)."""
    import ray

    deadline, completed = time.time() + timeout, False
    while time.time() < deadline:
        try:
            states = ray.get([a.calls.remote() for a in actors],
                             timeout=max(0.1, deadline - time.time()))
        except Exception:  # a rank on a lost node, or gone
            return None
        seqs = [seq for seq, _ in states]
        newest = max(seqs)
        if min(seqs) == newest and not any(running for _, running in states):
            return newest
        if min(seqs) < newest and not completed:  # then wait for it to reach them
            if newest - min(seqs) > 1:  # more than the one call is missing
                return None
            _complete(actors, seqs, newest)
            completed = True
        time.sleep(0.05)
    return None


def _complete(actors: list[Any], seqs: list[int], newest: int) -> None:
    """Give call `newest` to the ranks that did not get it (as rank r of the group)."""
    import ray

    call = ray.get(actors[seqs.index(newest)].call_numbered.remote(newest))
    if call is None:  # its holder moved on: nothing to give
        return
    for rank, actor in enumerate(actors):
        if seqs[rank] < newest:
            actor.call.remote(dict(call, rank=rank))


def group_name(run_id: str, name: str) -> str:
    """The name a worker is told (`alignflow.detached.own`): its group's, when the run is
    supervised; "" otherwise."""
    return f"alignflow:{run_id}:{name}" if supervised() else ""
