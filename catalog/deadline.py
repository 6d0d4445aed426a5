"""The wall-clock deadline of catalog SQL: one daemon thread interrupts overdue cursors.

The deadline covers the whole query, streaming of its result included. `SqlLimits` caps a
timeout at a day, and the thread never waits longer than an hour at a time, so no timeout,
however large, can make its wait overflow and kill the thread (which would leave every
later query without a deadline).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

_LONGEST_WAIT_S = 3600.0


class _Watchdog:
    """One daemon thread that interrupts cursors whose deadline passed (a thread per query
    would cost more than a short query)."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[int, tuple[float, duckdb.DuckDBPyConnection, threading.Event]] = {}
        self._next = 0
        self._thread: threading.Thread | None = None

    def arm(self, cur: duckdb.DuckDBPyConnection, seconds: float) -> tuple[int, threading.Event]:
        fired = threading.Event()
        with self._cond:
            self._next += 1
            self._due[self._next] = (time.monotonic() + seconds, cur, fired)
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="alignflow-sql-deadline",
                                                daemon=True)
                self._thread.start()
            self._cond.notify()
            return self._next, fired

    def disarm(self, token: int) -> None:
        with self._cond:
            self._due.pop(token, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                soonest = self._fire_due(time.monotonic())
                wait = _LONGEST_WAIT_S if soonest is None else soonest - time.monotonic()
                self._cond.wait(min(max(0.0, wait), _LONGEST_WAIT_S))

    def _fire_due(self, now: float) -> float | None:
        """Interrupt every overdue cursor; the next deadline, if any. (Its own frame, so the
        waiting thread holds no cursor.)"""
        for token in [t for t, (when, _, _) in self._due.items() if when <= now]:
            _, cur, fired = self._due.pop(token)
            fired.set()
            cur.interrupt()
        return min((when for when, _, _ in self._due.values()), default=None)


_WATCHDOG = _Watchdog()


@contextmanager
def deadline(cur: duckdb.DuckDBPyConnection, seconds: float) -> Iterator[threading.Event]:
    """Interrupt `cur`'s running query after `seconds`; the event says whether it fired."""
    token, fired = _WATCHDOG.arm(cur, seconds)
    try:
        yield fired
    finally:
        _WATCHDOG.disarm(token)
