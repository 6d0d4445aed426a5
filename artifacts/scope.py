"""The running task's scope: where task code writes, held in a contextvar.

The engine enters a `TaskScope` around a task body; the body writes tables through
`current_scope().write(...)`, and the engine lists `scope.staged` in the manifest it
commits. Nothing written here is visible before that commit.

On a worker group of N ranks the same task runs on every rank; only rank 0's result is
committed, so `write` on another rank (a follower) stages nothing and returns a ref with an
empty path: followers compute what they must (collectives) and leave the writing to rank 0.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from alignflow.artifacts import schemas
from alignflow.artifacts.parquet_io import ArtifactRef, write_table
from alignflow.artifacts.schemas import TableSchema
from alignflow.artifacts.store import Store
from alignflow.errors import FlowError

_SCOPE: contextvars.ContextVar[TaskScope | None] = contextvars.ContextVar(
    "alignflow_task_scope", default=None)
BEAT_S = 3.0  # a task's beats reach the store at most this often
_BEATEN: dict[str, float] = {}  # task key -> when it last wrote a beat


def beat_path(run_id: str, task_key: str) -> str:
    return f"runs/{run_id}/progress/beats/{task_key}.json"


def beat(done: int | float, total: int | float | None = None, unit: str = "") -> None:
    """Say how far the running task is (`done` of `total` `unit`: 24 of 64 sequences) for
    the driver's heartbeat (`flows/control/heartbeat.py`); written at most every `BEAT_S`. A no-op
    outside a task and on a follower rank; a failed write is ignored."""
    scope = _SCOPE.get()
    if scope is None or not scope.is_lead:
        return
    now = time.monotonic()
    if now - _BEATEN.get(scope.task_key, 0.0) < BEAT_S and done != total:
        return
    _BEATEN[scope.task_key] = now
    with contextlib.suppress(Exception):
        scope.store.write_json(beat_path(scope.run_id, scope.task_key),
                               {"done": done, "total": total, "unit": unit, "at": time.time()})


@dataclass
class TaskScope:
    """Store, run id, task key, seed and attempt of the task now running."""

    store: Store
    run_id: str
    task_key: str
    seed: int
    attempt: int = 1
    staged: list[ArtifactRef] = field(default_factory=list)
    pending: list[Future] = field(default_factory=list)
    rank: int = 0
    world_size: int = 1

    @property
    def is_lead(self) -> bool:
        """Whether this attempt's output is the one committed (rank 0 of its worker group)."""
        return self.rank == 0

    @property
    def task(self) -> str:
        """The task's name: the last segment of its key."""
        return self.task_key.rsplit("/", 1)[-1]

    def write(self, table_name: str | TableSchema, table: Any, *,
              partition: dict[str, int | str] | None = None) -> ArtifactRef:
        """Stage one data file; it becomes visible when the engine commits this task.
        A follower rank writes nothing (see the module docstring)."""
        ref = self.stage(table_name, table, partition=partition)
        self.staged.append(ref)
        return ref

    def stage(self, table_name: str | TableSchema, table: Any, *,
              partition: dict[str, int | str] | None = None) -> ArtifactRef:
        """Write one data file of this task without listing it: for background work
        (`defer`) whose future returns the refs to list. A follower rank writes nothing."""
        if not self.is_lead:
            schema = table_name if isinstance(table_name, TableSchema) else schemas.get(table_name)
            return ArtifactRef(table=schema.name, path="", rows=0, schema=schema.name,
                               schema_version=schema.version, bytes=0)
        return write_table(self.store, table_name, table, run_id=self.run_id,
                           task=self.task_key.replace("/", "-"), partition=partition or {},
                           task_key=self.task_key)

    def defer(self, future: Future) -> None:
        """Work of this task still running after its body returns (a checkpoint being
        written). The engine commits the task only once `future` is done; its result (a list
        of `ArtifactRef`s, or None) is listed in the manifest with the staged files."""
        self.pending.append(future)


def current_scope() -> TaskScope:
    """The scope of the task now running; `FlowError` outside a task body."""
    scope = _SCOPE.get()
    if scope is None:
        raise FlowError("current_scope() called outside a task; call it inside a @task "
                        "body run by a flow (or wrap the code in use_scope(...))")
    return scope


@contextlib.contextmanager
def use_scope(scope: TaskScope) -> Iterator[TaskScope]:
    """Make `scope` current for the enclosed block (the engine does this per task)."""
    token = _SCOPE.set(scope)
    try:
        yield scope
    finally:
        _SCOPE.reset(token)
