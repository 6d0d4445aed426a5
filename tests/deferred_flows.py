"""Flows whose tasks leave background work (like a checkpoint being written): one that can
only finish after the next task started (the deferred-commit tests, inline and Ray), and one
whose process is killed while a checkpoint is on its way (`lost_write`, on Ray)."""

from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa

from alignflow.artifacts.scope import current_scope
from alignflow.flows.engine import flow, task
from alignflow.flows.ray.workers import worker_group
from tests.flows_for_tests import bump, count


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


class Trainer:
    """A worker that trains a running total and writes each checkpoint in the background."""

    def __init__(self) -> None:
        self.pool, self.total = ThreadPoolExecutor(max_workers=1), 0

    def restore(self, store, checkpoint: str) -> None:
        self.total = int(store.read_json(checkpoint)["total"])


@task(worker="t")
def train(obj: Trainer, folder: str, x: int) -> dict:
    scope = current_scope()
    obj.total += x
    path = f"runs/{scope.run_id}/checkpoints/{scope.task_key}.json"
    hang = bump(folder, f"train-{x}") == 1 and x == 2

    def write() -> list:
        if hang:
            threading.Event().wait(120)  # its process is killed meanwhile
        scope.store.write_json(path, {"total": obj.total})
        return []
    scope.defer(obj.pool.submit(write))
    return {"total": obj.total, "checkpoint": path, "pid": os.getpid()}


@task
def use_then_kill(folder: str, out: dict) -> int:
    """Uses a train's output; the first time train-1's is used, kills that train's process
    while its checkpoint is still on its way."""
    bump(folder, f"use-{out['total']}")
    if out["total"] == 3 and count(folder, "train-2") == 1:
        os.kill(out["pid"], signal.SIGKILL)
    return out["total"]


@flow
def lost_write(cfg: dict) -> list:
    worker_group("t", Trainer, num_cpus=0)
    return [use_then_kill(cfg["dir"], train(cfg["dir"], x)) for x in (1, 2, 3)]
