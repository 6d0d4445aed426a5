"""Resource limits of catalog SQL: time, memory, threads, spill folder and query size.

A query over a big store can run for hours or take the machine's memory; these limits turn
that into one clear line. They are set on the catalog's own connection before it is locked
(`connection.py`), so user SQL cannot raise them. DuckDB spills to a private temporary
folder made for each catalog (mode 0700, removed on close) instead of its default `./.tmp`:
DuckDB may always read its temp folder, so it must hold nothing but its own spill files.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb

from alignflow.catalog.guard import MAX_QUERY_BYTES
from alignflow.errors import ConfigError

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|[kmgt]i?b|b)?\s*$", re.IGNORECASE)


def _default_threads() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(8, cores or 1))


def total_memory() -> int:
    import psutil

    return int(psutil.virtual_memory().total)


def parse_memory(text: str, flag: str = "--memory-limit") -> int:
    """Bytes from `50%` (of this machine's RAM) or a size such as `4GB`, `512MiB`."""
    match = _SIZE.match(str(text))
    if not match:
        raise ConfigError(f"{flag} {text!r}: expected a size such as 4GB, 512MiB or 50% (of RAM)")
    number, unit = float(match.group(1)), (match.group(2) or "").lower()
    size = total_memory() * number / 100 if unit == "%" else number * _UNITS[unit]
    if unit == "%" and not 0 < number <= 100 or size < 2**20:
        raise ConfigError(f"{flag} {text!r}: expected at least 1MiB and at most 100%")
    return int(size)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"


@dataclass(frozen=True, kw_only=True)
class SqlLimits:
    """Per-query time limit, memory limit (a size or a share of RAM), DuckDB threads and the
    largest query text accepted; checked when built, each bad value named."""

    timeout_s: float = 60.0
    memory: str = "50%"
    threads: int = field(default_factory=_default_threads)
    max_query_bytes: int = MAX_QUERY_BYTES

    def __post_init__(self) -> None:
        if not (isinstance(self.timeout_s, int | float) and math.isfinite(self.timeout_s)
                and self.timeout_s > 0):
            raise ConfigError(f"--timeout {self.timeout_s!r}: expected seconds > 0")
        if not isinstance(self.threads, int) or self.threads < 1:
            raise ConfigError(f"--threads {self.threads!r}: expected an integer >= 1")
        if not isinstance(self.max_query_bytes, int) or self.max_query_bytes < 1:
            raise ConfigError(f"max_query_bytes {self.max_query_bytes!r}: expected an integer >= 1")
        parse_memory(self.memory)

    @property
    def memory_bytes(self) -> int:
        return parse_memory(self.memory)


def private_temp_dir() -> str:
    """A fresh folder only this user can read (mkdtemp makes it 0700)."""
    return tempfile.mkdtemp(prefix="alignflow-sql-")


def remove_temp_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def apply(con: duckdb.DuckDBPyConnection, limits: SqlLimits, temp_dir: str) -> None:
    """Set threads, memory limit and spill folder (before the connection is locked)."""
    con.execute(f"SET threads = {int(limits.threads)}")
    con.execute(f"SET memory_limit = '{limits.memory_bytes}B'")
    con.execute("SET temp_directory = '" + temp_dir.replace("'", "''") + "'")


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
            if self._thread is None:
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
                self._cond.wait(None if soonest is None else max(0.0, soonest - time.monotonic()))

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
