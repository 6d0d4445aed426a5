"""The wall-clock deadline of catalog SQL: one daemon thread interrupts overdue cursors.

The deadline covers the whole query, streaming of its result included, and the opening of
a catalog (its views over the store's files: `steps`). `SqlLimits` caps a timeout at a day,
and the thread never waits longer than an hour at a time, so no timeout, however large, can
make its wait overflow and kill the thread (which would leave every later query without a
deadline).

`stop_all` is how a signal ends the work (catalog/process.py): every armed cursor is
interrupted through DuckDB's own `interrupt()`, and no new one may start. A cursor is
interrupted only while armed, and disarmed under the same lock before its connection may
be closed, so an interrupt never reaches a connection being closed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import duckdb

_LONGEST_WAIT_S = 3600.0
_STOPPING = threading.Event()


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

    def interrupt_all(self) -> None:
        with self._cond:
            for _, cur, _ in self._due.values():
                cur.interrupt()

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


def stop_all() -> None:
    """This process is ending (a signal): interrupt every armed query, start no new one."""
    _STOPPING.set()
    _WATCHDOG.interrupt_all()


def stopping() -> bool:
    return _STOPPING.is_set()


@contextmanager
def deadline(cur: duckdb.DuckDBPyConnection, seconds: float) -> Iterator[threading.Event]:
    """Interrupt `cur`'s running query after `seconds`; the event says whether it fired.
    KeyboardInterrupt at once when the process is stopping (checked once armed, so a
    `stop_all` either sees this cursor or is seen here)."""
    token, fired = _WATCHDOG.arm(cur, max(0.0, seconds))
    try:
        if _STOPPING.is_set():
            raise KeyboardInterrupt
        yield fired
    finally:
        _WATCHDOG.disarm(token)


@contextmanager
def steps(cur: duckdb.DuckDBPyConnection, seconds: float,
          late: Callable[[str], Exception]) -> Iterator[Callable[[str], None]]:
    """A job of many statements on `cur` (opening a catalog) under one deadline. Yields
    `step(what)`, to call before each part: it raises `late(what)` once the deadline has
    passed, KeyboardInterrupt once the process is stopping. A statement running at the
    deadline is interrupted; its InterruptException leaves as `late(the last step)`."""
    doing = ["starting"]

    def step(what: str) -> None:
        doing[0] = what
        if _STOPPING.is_set():
            raise KeyboardInterrupt
        if fired.is_set():
            raise late(what)

    with deadline(cur, seconds) as fired:
        try:
            yield step
        except duckdb.InterruptException:
            raise (late(doing[0]) if fired.is_set() else KeyboardInterrupt()) from None
        except RuntimeError as exc:  # DuckDB's word for a Ctrl-C seen inside a statement
            if "interrupted" in str(exc).lower():
                raise KeyboardInterrupt from None
            raise
        step(doing[0])  # a deadline that fired during the last step
