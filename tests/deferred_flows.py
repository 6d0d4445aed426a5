"""A flow whose first task leaves background work (like a checkpoint being written) that can
only finish after the next task started: used by the deferred-commit tests, inline and Ray."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from alignflow.artifacts.scope import current_scope
from alignflow.flows.engine import flow, task
from alignflow.flows.ray.workers import worker_group


class Writer:
    """A worker whose `save` task hands its slow part to a background thread."""

    def __init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=1)
        self.release = threading.Event()
        self.events: list[str] = []

    def restore(self, store, folder) -> None:
        pass


@task(worker="w")
def save(obj: Writer, fail: bool) -> dict:
    scope = current_scope()

    def write() -> list:
        assert obj.release.wait(10)
        obj.events.append("written")
        if fail:
            raise OSError("disk full")
        return [scope.stage("metrics", pa.table({"step": [0], "key": ["k"], "value": [1.0]}))]
    scope.defer(obj.pool.submit(write))
    return {"checkpoint": "runs/x/ck"}


@task(worker="w")
def after(obj: Writer) -> int:
    obj.events.append("next task ran")
    obj.release.set()  # the background write could only finish after this task started
    return len(obj.events)


@flow
def deferred(cfg: dict) -> int:
    worker_group("w", Writer, num_cpus=0)
    save(cfg["fail"])
    return after()
