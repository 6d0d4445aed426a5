"""Resource limits of catalog SQL: time, memory, threads, result size and query size.

A query over a big store can run for hours, take the machine's memory or return more rows
than anyone can read; these limits turn that into one clear line. Threads and DuckDB's
memory limit are set on the catalog's own connection before it is locked
(`connection.py`), so user SQL cannot raise them. Every limit is bounded by the machine: a
timeout of at most a day (`deadline.py`), at most the usable cores, at most the RAM; the
default memory limit is a quarter of the RAM, leaving the rest to the machine's other work.

DuckDB's memory limit binds its buffer manager only: one huge value (`repeat('x', 1e9)`)
or a result being converted is allocated outside it. `cap_process_memory` therefore bounds
the whole `alignflow sql` process as well (RLIMIT_DATA, the process's data memory), from
before the catalog opens (its views over the store's files) to the end: what it holds then,
plus twice the memory limit, plus `PROCESS_MARGIN` for the result on its way out. Twice,
because DuckDB's allocator reserves more than it touches: measured here (2026-11-26), a
30M-row sort grew the data memory by 1.9x / 1.5x / 0.9x its 256 MB / 1 GB / 4 GB limit
while resident memory grew 1.1x / 1.0x / 0.8x. An allocation
past the cap fails cleanly (`QueryLimit`) instead of taking the machine's memory:
`repeat('x', 1e9)` under a 256 MB limit needs 3.3 GB more and stops at once.
The result is bounded too (`max_rows`, `max_bytes`): `alignflow sql` streams csv, json and
parquet out batch by batch, so a big result never sits whole in memory.

What the process holds in RAM stays under the memory limit plus `RSS_MARGIN`: the fixed cost
of Python, pyarrow and DuckDB (a `SELECT 1` peaks at 210 MiB, measured 2026-12-02), plus
174 MiB for what DuckDB allocates outside its limit and the result on its way out: one
batch (`results.batch_rows`) and the DuckDB vector of 2,048 rows it is cut from, which for
rows of 100 kB is 200 MB (wider rows are bounded by the cap above, not by this margin).
`bench/store_bounds.py` measures each case's peak resident memory against it.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

import duckdb

from alignflow.catalog.guard import MAX_QUERY_BYTES
from alignflow.errors import ConfigError

_UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(%|[kmgt]i?b|b)?\s*$", re.IGNORECASE)
MAX_TIMEOUT_S = 86_400.0  # a day: a longer query is a batch job, not a catalog query
DEFAULT_MAX_ROWS = 1_000_000
DEFAULT_MAX_BYTES = "1GiB"
PROCESS_MARGIN = 512 * 2**20
RSS_MARGIN = 384 * 2**20


def usable_cores() -> int:
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, cores or 1)


def _default_threads() -> int:
    return min(8, usable_cores())


def total_memory() -> int:
    """This machine's RAM (sysconf: psutil's import alone cost `sql` ~0.03 CPU s)."""
    try:
        return int(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):  # not POSIX
        import psutil

        return int(psutil.virtual_memory().total)


def parse_memory(text: str, flag: str = "--memory-limit", share: bool = True) -> int:
    """Bytes from `25%` (of this machine's RAM) or a size such as `4GB`, `512MiB`; never
    more than the RAM."""
    match = _SIZE.match(str(text))
    if not match or not share and match.group(2) == "%":
        raise ConfigError(f"{flag} {text!r}: expected a size such as 4GB, 512MiB"
                          + (" or 25% (of RAM)" if share else ""))
    number, unit = float(match.group(1)), (match.group(2) or "").lower()
    size = total_memory() * number / 100 if unit == "%" else number * _UNITS[unit]
    if unit == "%" and not 0 < number <= 100 or size < 2**20:
        raise ConfigError(f"{flag} {text!r}: expected at least 1MiB and at most 100%")
    if share and size > total_memory():
        raise ConfigError(f"{flag} {text!r}: more than this machine's "
                          f"{human_bytes(total_memory())} of RAM; expected at most 100%")
    return int(size)


def human_bytes(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024:
            return f"{n:.3g} {unit}"
        n /= 1024
    return f"{n:.3g} TiB"


@dataclass(frozen=True, kw_only=True)
class SqlLimits:
    """Per-query time limit, memory limit (a size or a share of RAM), DuckDB threads, the
    largest result (rows, Arrow bytes) and the largest query text accepted; checked when
    built against this machine, each bad value named."""

    timeout_s: float = 60.0
    memory: str = "25%"
    threads: int = field(default_factory=_default_threads)
    max_rows: int = DEFAULT_MAX_ROWS
    max_bytes: str = DEFAULT_MAX_BYTES
    max_query_bytes: int = MAX_QUERY_BYTES

    def __post_init__(self) -> None:
        if not (isinstance(self.timeout_s, int | float) and math.isfinite(self.timeout_s)
                and 0 < self.timeout_s <= MAX_TIMEOUT_S):
            raise ConfigError(f"--timeout {self.timeout_s!r}: expected seconds > 0 and at most "
                              f"{MAX_TIMEOUT_S:.0f} (a day)")
        cores = usable_cores()
        if not isinstance(self.threads, int) or not 1 <= self.threads <= cores:
            raise ConfigError(f"--threads {self.threads!r}: expected an integer from 1 to "
                              f"{cores} (this machine's usable cores)")
        for name in ("max_rows", "max_query_bytes"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                flag = "--max-rows" if name == "max_rows" else name
                raise ConfigError(f"{flag} {value!r}: expected an integer >= 1")
        parse_memory(self.memory)
        self.max_result_bytes  # noqa: B018 - checked now, not at the first query

    @property
    def memory_bytes(self) -> int:
        return parse_memory(self.memory)

    @property
    def max_result_bytes(self) -> int:
        return parse_memory(self.max_bytes, "--max-bytes", share=False)


def apply(con: duckdb.DuckDBPyConnection, limits: SqlLimits, temp_dir: str) -> None:
    """Set threads, memory limit and spill folder (before the connection is locked)."""
    con.execute(f"SET threads = {int(limits.threads)}")
    con.execute(f"SET memory_limit = '{limits.memory_bytes}B'")
    con.execute("SET temp_directory = '" + temp_dir.replace("'", "''") + "'")


@contextmanager
def cap_process_memory(limits: SqlLimits) -> Iterator[int | None]:
    """Inside, this process's data memory (RLIMIT_DATA) is bounded by what it uses now plus
    twice the memory limit plus `PROCESS_MARGIN` (a lower cap already set is kept); yields
    the cap in bytes, or None where the platform has no such limit. For `alignflow sql`,
    which does nothing else meanwhile: a library user's process is theirs to bound."""
    try:
        import resource

        with open("/proc/self/status") as f:
            used = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmData:"))
    except (ImportError, OSError, StopIteration, ValueError):
        yield None
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
    cap = used + 2 * limits.memory_bytes + PROCESS_MARGIN
    cap = min(c for c in (cap, soft, hard) if c != resource.RLIM_INFINITY)
    resource.setrlimit(resource.RLIMIT_DATA, (cap, hard))
    try:
        yield cap
    finally:
        resource.setrlimit(resource.RLIMIT_DATA, (soft, hard))
