"""The running task's scope: where task code writes, held in a contextvar.

The engine enters a `TaskScope` around a task body; the body writes tables through
`current_scope().write(...)`, and the engine lists `scope.staged` in the manifest it
commits. Nothing written here is visible before that commit.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from alignflow.artifacts.parquet_io import ArtifactRef, write_table
from alignflow.artifacts.schemas import TableSchema
from alignflow.artifacts.store import Store
from alignflow.errors import FlowError

_SCOPE: contextvars.ContextVar[TaskScope | None] = contextvars.ContextVar(
    "alignflow_task_scope", default=None)


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

    @property
    def task(self) -> str:
        """The task's name: the last segment of its key."""
        return self.task_key.rsplit("/", 1)[-1]

    def write(self, table_name: str | TableSchema, table: Any, *,
              partition: dict[str, int | str] | None = None) -> ArtifactRef:
        """Stage one data file; it becomes visible when the engine commits this task."""
        ref = self.stage(table_name, table, partition=partition)
        self.staged.append(ref)
        return ref

    def stage(self, table_name: str | TableSchema, table: Any, *,
              partition: dict[str, int | str] | None = None) -> ArtifactRef:
        """Write one data file of this task without listing it: for background work
        (`defer`) whose future returns the refs to list."""
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
