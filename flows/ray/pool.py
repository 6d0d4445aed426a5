"""A small pool of warm worker processes for runs on in-process Ray.

A cold Ray worker pays Python's start and the flow's imports (torch, transformers: seconds)
before its first task. The pool's actors start with Ray and import the flow's module at
once, while the driver still checks config and data. Plain tasks (prompt loading, data
preparation, a reference pass) run on an idle pool actor, and the first worker group
declared takes one over as its host: the process that prepared the data holds the models,
and no second process keeps torch resident. Size: `$ALIGNFLOW_RAY_POOL` (default 1; 0 = no
pool).
"""

from __future__ import annotations

import os
from typing import Any

_ACTORS: list[Any] = []  # the pool, in creation order
_BOUND: set[int] = set()  # indices of actors that became a worker group's host
_CALLS: dict[int, list[Any]] = {}  # index -> object refs of calls not known to be done
_WARMING: dict[int, Any] = {}  # index -> its warm-up call (tasks may queue behind it)
_DEAD: set[int] = set()  # actors that died (a task killed them): never used again


def size() -> int:
    return max(0, int(os.environ.get("ALIGNFLOW_RAY_POOL", "1")))


def create(warm: tuple[str, ...] = ()) -> None:
    """Start the pool (once; Ray must be up) and have each actor import `warm` modules."""
    if _ACTORS:
        return
    from alignflow.flows.ray.worker_host import host_actor_class

    cls = host_actor_class()
    for i in range(size()):
        actor = cls.options(num_cpus=0, name=f"alignflow:pool:{os.getpid()}:{i}").remote(None)
        _ACTORS.append(actor)
        _CALLS[i] = []
        if warm:
            _WARMING[i] = actor.warm.remote(tuple(warm))


def _index(actor: Any) -> int | None:
    return next((i for i, a in enumerate(_ACTORS) if a is actor), None)


def track(actor: Any, ref: Any) -> None:
    """Note a call on `actor` (no-op for actors outside the pool)."""
    i = _index(actor)
    if i is not None:
        _CALLS[i].append(ref)


def _idle(i: int) -> bool:
    """Nothing queued on actor `i` (and it is alive: a call that died with it retires it)."""
    import ray

    if i in _DEAD:
        return False
    calls = _CALLS[i]
    if calls:
        done, _ = ray.wait(calls, num_returns=len(calls), timeout=0)
        done_ids = {r.hex() for r in done}
        _CALLS[i] = [r for r in calls if r.hex() not in done_ids]
        for ref in done:
            try:
                ray.get(ref, timeout=0)
            except ray.exceptions.RayActorError:
                _DEAD.add(i)
                return False
            except Exception:  # a task's own failure says nothing of the actor
                pass
    return not _CALLS[i]


def take() -> Any | None:
    """A pool actor to become a worker group's host (busy or not), or None."""
    for i, actor in enumerate(_ACTORS):
        if i not in _BOUND and i not in _DEAD:
            _BOUND.add(i)
            return actor
    return None


def idle() -> Any | None:
    """A pool actor with no task queued (a warm-up may be: the task waits for the imports
    it would need anyway), for a plain task; None when all are busy."""
    return next((a for i, a in enumerate(_ACTORS) if _idle(i)), None)


def close() -> None:
    """Kill the pool's actors (the executor shuts down: nothing may keep torch resident)."""
    import ray

    for actor in _ACTORS:
        ray.kill(actor, no_restart=True)
    _ACTORS.clear()
    _BOUND.clear()
    _CALLS.clear()
    _WARMING.clear()
    _DEAD.clear()
