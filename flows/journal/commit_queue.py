"""Commits that wait for background work, in call order.

A task may return while work it started still runs (a checkpoint on its way to the store:
`TaskScope.defer`). The flow gets its output at once and goes on; the task's manifest is
written only when that work is done, and every task finished after it queues behind it,
so the committed tasks are always a prefix of the run's order: a crash at any point leaves
a journal that resumes bitwise. Background work lost with its process may be done again
(`redo`, `flows/control/redo.py`) before the run has to be re-formed.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any

from alignflow.errors import TaskFailed


class CommitQueue:
    """Finished tasks not yet committed: (future, manifest fields, background handle)."""

    def __init__(self) -> None:
        self.items: deque[tuple[Any, dict, Any]] = deque()

    def __bool__(self) -> bool:
        return bool(self.items)

    def add(self, fut: Any, fields: dict, handle: Any = None) -> None:
        """Queue a finished task; `handle` (`.ready()`, `.wait()`) is its background work."""
        self.items.append((fut, fields, handle))

    def flush(self, write: Callable[[Any, dict], None], *, block: bool,
              redo: Callable[[TaskFailed], bool] | None = None) -> None:
        """`write(fut, fields)` each queued task whose work is done, in order; with `block`,
        wait for all of them. A failed background work fails its task (kind system: the
        run resumes and redoes it) unless `redo(failed)` did it again: it then put the
        new attempts' fields and handles in the queue, and returns True."""
        while self.items:
            fut, fields, handle = self.items[0]
            if handle is not None and not block and not handle.ready():
                return
            if handle is not None:
                done = _wait(self, fut, handle, redo)
                if done is None:
                    continue  # done again: the queue holds the new attempts
                fields = _settled(fields, done)
            self.items.popleft()
            write(fut, fields)


def _wait(queue: CommitQueue, fut: Any, handle: Any,
          redo: Callable[[TaskFailed], bool] | None) -> dict | None:
    try:
        return handle.wait()
    except Exception as exc:
        exc = getattr(exc, "cause", None) or exc  # a Ray error wraps the real one
        line = (str(exc).strip().splitlines() or [""])[0]
        lost = f"its checkpoint was not written ({type(exc).__name__}: {line})"
        fault = type(exc).__name__  # a lost process or node: control/recovery.py
    if redo is not None and redo(_failed(fut.key, lost, fault)):
        return None
    queue.items.clear()
    raise _failed(fut.key, f"{lost}; resume to run it again", fault) from None


def _failed(key: str, error: str, fault: str) -> TaskFailed:
    return TaskFailed(key, error, kind="system", fault=fault)


def _settled(fields: dict, done: dict) -> dict:
    return dict(fields, artifacts=[*fields["artifacts"], *done["artifacts"]],
                settled=done["settled"])
