"""Checkpoints off the critical path: a host writes each resume checkpoint on one background
thread while the next task runs from the weights in memory.

The trainer captures what must be read at once (`snapshot`: RNG, step count) and is held
(`hold`) so it does not train again before the write is done; the task hands the write to
the engine (`TaskScope.defer`), which commits the task only once it is durable. A crash
before that leaves the task uncommitted, so a resumed run redoes it from the previous
checkpoint and ends bitwise equal.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from alignflow.artifacts.scope import current_scope

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store


class BackgroundSaves:
    """One writer thread per host, so checkpoints reach the store in the order taken."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None

    def save(self, trainer: Any, store: Store, rel_dir: str, extra: dict,
             after: Callable[[int], list]) -> None:
        """Checkpoint `trainer` into `rel_dir`, then `after(bytes)` (index rows, pruning;
        returns the refs it wrote) — in the background when the trainer can `snapshot`."""
        scope = current_scope()
        snapshot = getattr(trainer, "snapshot", None)
        if snapshot is None:  # a trainer that can only save in place (collectives, shards)
            done: Future = Future()
            done.set_result(after(trainer.save(store, rel_dir, extra=extra)))
            scope.defer(done)
            return
        write = snapshot(extra=extra)
        future = self._writer().submit(lambda: after(write(store, rel_dir)))
        trainer.hold(future)
        scope.defer(future)

    def _writer(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="alignflow-save")
        return self._pool
