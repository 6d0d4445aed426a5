"""The body of a worker-group actor (and of a warm pool actor, `flows/ray_pool.py`): it
holds the group's object and runs the group's tasks on it."""

from __future__ import annotations

import os
from typing import Any

from alignflow.flows import wrapper

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
        _REMOTES["host"] = ray.remote(max_restarts=0, max_task_retries=0,
                                      concurrency_groups={"durable": 1})(WorkerHost)
    return _REMOTES["host"]


class WorkerHost:
    """The body of a worker-group actor: holds `factory()` and runs worker tasks on it. A
    pool actor starts without one (`factory=None`) and runs plain tasks until `install`."""

    def __init__(self, factory: Any) -> None:
        self.obj = build(factory) if factory is not None else None

    def warm(self, modules: tuple[str, ...]) -> None:
        """Import the flow's modules now, before the first task needs them."""
        import importlib

        for name in modules:
            importlib.import_module(name)

    def install(self, factory: Any) -> None:
        """Become a worker group's host: build its object and load its models."""
        self.obj = build(factory)

    def call(self, call: dict) -> dict:
        return wrapper.execute(call, self.obj)

    def restore(self, store: Any, checkpoint: str) -> None:
        self.obj.restore(store, checkpoint)

    def durable(self, token: str) -> dict:
        return wrapper.durable(token)

    def pid(self) -> int:
        return os.getpid()
