"""The body of a worker-group actor (and of a warm pool actor, `flows/ray/pool.py`): it
holds the group's object and runs the group's tasks on it.

A group whose object fails to build (a missing package, a model that does not load) keeps
the error and fails each of its tasks with it, so the task's error says why the worker
could not start instead of a later `'NoneType' object has no attribute ...`.
"""

from __future__ import annotations

import os
from typing import Any

from alignflow import detached
from alignflow.artifacts.store import Store
from alignflow.errors import FlowError
from alignflow.flows import wrapper
from alignflow.timeline import mark

_REMOTES: dict[str, Any] = {}


def build(factory: Any) -> Any:
    """A worker group's object, with what it will need loaded now (`preload()`, if it has
    one: e.g. a model host's models), not inside its first task."""
    obj = factory()
    getattr(obj, "preload", lambda: None)()
    return obj


def host_actor_class() -> Any:
    """The Ray actor class of worker groups (defined once per process: Ray exports it once)."""
    import ray

    if "host" not in _REMOTES:
        # the group named on the method, not per call: Ray Client refuses a call's
        # `.options(concurrency_group=...)` (a driver joined with ray://host:10001)
        ray.method(concurrency_group="durable")(WorkerHost.durable)
        _REMOTES["host"] = ray.remote(max_restarts=0, max_task_retries=0,
                                      concurrency_groups={"durable": 1})(WorkerHost)
    return _REMOTES["host"]


class WorkerStartFailed(FlowError):
    """A worker group's object could not be built; its tasks fail with this (user kind: a
    retry in the same process would fail the same way)."""

    kind = "user"


def _start_failure(name: str, exc: BaseException) -> WorkerStartFailed:
    failure = WorkerStartFailed(f"worker group {name!r} failed to start: "
                                f"{type(exc).__name__}: {wrapper.first_line(exc)}")
    failure.__cause__ = exc
    return failure


class WorkerHost:
    """The body of a worker-group actor: holds `factory()` and runs worker tasks on it. A
    pool actor starts without one (`factory=None`) and runs plain tasks until `install`."""

    def __init__(self, factory: Any, name: str = "", owner: str = "") -> None:
        self.obj: Any = None  # the group's object (a user class: any type)
        self.failure: WorkerStartFailed | None = None
        detached.own(owner)  # what its object starts to outlive it is named after it
        if factory is not None:
            self.install(factory, name)

    def warm(self, modules: tuple[str, ...]) -> None:
        """Import the flow's modules now, before the first task needs them, and the task
        bodies and hosts they name (which the flow's driver does not import)."""
        import importlib

        from alignflow.flows.lazyref import MODULES

        mark("warm start")
        for name in modules:
            importlib.import_module(name)
        for name in sorted(MODULES):
            importlib.import_module(name)
        mark("warm end")

    def install(self, factory: Any, name: str = "") -> None:
        """Become a worker group's host: build its object and load its models. A failure is
        kept (with its traceback) for the group's tasks to report."""
        mark(f"host {name} load start")
        try:
            self.obj, self.failure = build(factory), None
            mark(f"host {name} loaded")
        except Exception as exc:
            self.obj, self.failure = None, _start_failure(name, exc)

    def call(self, call: dict) -> dict:
        if self.failure is not None:
            return wrapper.execute({**call, "fn": _raiser(self.failure)}, None)
        return wrapper.execute(call, self.obj)

    def restore(self, store: Store, checkpoint: str) -> None:
        if self.failure is None:  # a worker that failed to start says so at its first task
            self.obj.restore(store, checkpoint)

    def durable(self, token: str) -> dict:
        return wrapper.durable(token)

    def pid(self) -> int:
        return os.getpid()


def _raiser(exc: BaseException) -> Any:
    def fail(*_args: Any, **_kwargs: Any) -> None:
        raise exc

    return fail
