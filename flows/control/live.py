"""A task attempt in flight, and the retry backoff: the driver's small parts (`driver.py`)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from alignflow.flows.engine import Task


def backoff(attempt: int) -> float:
    """Seconds to wait before retrying after failed attempt `attempt` (doubling, ≤ 30 s)."""
    base = float(os.environ.get("ALIGNFLOW_RETRY_BASE", "0.5"))
    return min(30.0, base * 2 ** (attempt - 1))


class LiveFuture:
    """A task running now; `.result()` waits, retries and commits."""

    def __init__(self, driver: Any, task: Task, key: str, args: tuple, kwargs: dict,
                 input_hash: str | None) -> None:
        self.driver, self.task, self.key = driver, task, key
        self.args, self.kwargs, self.input_hash = args, kwargs, input_hash
        self.attempt, self._value, self._done = 1, None, False
        self.queued = 0.0  # when the current attempt was handed to the executor
        self.incarnation = 0  # its worker group's process it was launched on (driver.launch)
        self.handle = driver.launch(self)

    def result(self) -> Any:
        if not self._done:
            self._value, self._done = self.driver.resolve(self), True
        return self._value

    def done(self) -> bool:
        """Whether `result()` would return without waiting for the attempt (never blocks)."""
        return self._done or self.handle.ready()


def manifest_record(run_id: str, seed: int, seq: int, task: Task | None, key: str,
                    input_hash: str | None, fields: dict) -> dict:
    """A task's manifest as the journal keeps it (`runs/<id>/tasks/<key>.json`)."""
    return {"format": 1, "run_id": run_id, "task_key": key,
            "task": task.name if task else key.rsplit("-", 1)[0],
            "version": task.opts.version if task else 1,
            "code_hash": task.code_hash if task else None, "input_hash": input_hash,
            "seed": seed, "artifacts": [], "checkpoint": None,
            "worker": task.opts.worker if task else None, "seq": seq, **fields}
