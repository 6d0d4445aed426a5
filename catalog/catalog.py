"""`Catalog`: read-only SQL over the committed data of every run in a store.

    cat = Catalog("s3://bucket/runs-store")
    cat.sql("SELECT iteration, avg(reward) FROM rollouts WHERE run_id = ? GROUP BY 1", [rid])

Views: `runs`, `tasks`, `rollouts`, `preferences`, `sft_samples`, `metrics`, `checkpoints`
(plus any other table a manifest lists). They are a snapshot of what was committed when
the catalog was opened or last `refresh()`ed; opening (the scan and the views) runs under
the time limit too. User SQL passes the read-only guard first and runs under `SqlLimits`
(time, memory, threads, result rows and bytes); `cursor()` is guarded the same way, and
`stream()` hands the result out batch by batch. A file that cannot be read, does not match
its manifest or is absurdly wide is left out and listed in `problems`; the rest is served.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import duckdb

from alignflow.artifacts.store import Store
from alignflow.catalog import connection
from alignflow.catalog.cursor import GuardedCursor, Params
from alignflow.catalog.deadline import deadline
from alignflow.catalog.guard import check_read_only, parsing_on, tables_named
from alignflow.catalog.index import Index
from alignflow.catalog.index import load as load_index
from alignflow.catalog.limits import SqlLimits, human_bytes
from alignflow.catalog.manifests import Problem, Snapshot, run_of, scan
from alignflow.catalog.results import Rows, short
from alignflow.catalog.spill import private_temp_dir, remove_temp_dir
from alignflow.errors import ConfigError, QueryLimit, SchemaError, SqlRefused

if TYPE_CHECKING:
    import pyarrow as pa

_FILE_ERRORS = (duckdb.IOException, duckdb.InvalidInputException, duckdb.SerializationException,
                duckdb.ConversionException)  # only when the message names a committed file
_MAX_LEFT_OUT_PER_QUERY = 16


class _Unreadable(Exception):
    def __init__(self, rel: str, problem: Problem) -> None:
        super().__init__(problem.message)
        self.rel, self.problem = rel, problem


class _LeftOut(SchemaError):
    """A file found unreadable after part of a streamed result was handed out."""


class Catalog:
    """DuckDB views over a store; one connection per catalog, one cursor per thread.
    `for_query`: the one query this catalog is opened for (`alignflow sql QUERY`): only the
    views it names are built (all of them when it names none, or one not known)."""

    def __init__(self, store_or_url: Store | str | None = None, *,
                 storage_options: dict[str, Any] | None = None,
                 limits: SqlLimits | None = None, for_query: str | None = None) -> None:
        if isinstance(store_or_url, Store):
            self.store = store_or_url
        else:
            self.store = Store.open(store_or_url, storage_options=storage_options)
        self.limits = limits or SqlLimits()
        self._temp_dir = private_temp_dir()
        self._cleanup = weakref.finalize(self, remove_temp_dir, self._temp_dir)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._cursors: list[duckdb.DuckDBPyConnection] = []  # of the current connection
        self._generation = 0
        self._snap: Snapshot | None = None
        self._built: connection.Built | None = None
        self._left_out: dict[str, Problem] = {}
        self._names, self._first = None, None
        if for_query is not None:  # parsed on the connection its views go in (one database)
            self._first = duckdb.connect(":memory:")
            with parsing_on(self._first):
                self._names = tables_named(for_query)
        self._index = Index(self.store.url, None)
        self.refresh()

    def refresh(self) -> None:
        """Re-scan the manifests; later queries see everything committed up to now. The
        scan and the views together run under the time limit (`QueryLimit` past it). What
        the scan and the checks learn is kept in the local index (`index.py`), so the next
        opening reads only what changed."""
        until = time.monotonic() + self.limits.timeout_s
        self._index = load_index(self.store.url)
        snap = scan(self.store, self._index)
        self._install(snap, {}, until)
        self._index.save()

    def _install(self, snap: Snapshot, left_out: dict[str, Problem],
                 until: float | None = None) -> None:
        seconds = None if until is None else until - time.monotonic()
        first, self._first = self._first, None
        built = connection.build(self.store, snap, self.limits, self._temp_dir, left_out,
                                 seconds=seconds, index=self._index, names=self._names,
                                 con=first)
        with self._lock:
            self._con, self._built, self._snap = built.con, built, snap
            self._left_out, self._cursors = left_out, []
            self._generation += 1

    @property
    def problems(self) -> list[Problem]:
        """Files left out of the views (corrupt JSON or Parquet, paths leaving the store)."""
        snap, built = self._snap, self._built
        return [*(snap.problems if snap else []), *(built.problems if built else [])]

    @property
    def temp_dir(self) -> str:
        """DuckDB's private spill folder for this catalog (removed on close)."""
        return self._temp_dir

    def cursor(self) -> GuardedCursor:
        """This thread's cursor: `execute()` runs through the same guard and limits as `sql()`."""
        local = self._local
        if getattr(local, "guarded", None) is None:
            local.guarded = GuardedCursor(self.sql)
        return local.guarded

    def _raw_cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's DuckDB cursor on the current connection (for catalog code only)."""
        local = self._local
        if getattr(local, "generation", None) != self._generation:
            with self._lock:
                if self._con is None:
                    raise ConfigError("catalog is closed; open a new Catalog")
                local.cursor, local.generation = self._con.cursor(), self._generation
                self._cursors.append(local.cursor)
        return local.cursor

    def interrupt(self) -> None:
        """Interrupt every running query of this catalog (from any thread). Under the lock
        `close()` takes, so no interrupt reaches a connection being closed."""
        with self._lock:
            for cur in self._cursors:
                cur.interrupt()

    def sql(self, query: str, params: Params = None) -> pa.Table:
        """Run read-only `query` (`?` placeholders bound from `params`); the last result."""
        for _ in range(_MAX_LEFT_OUT_PER_QUERY):
            try:
                with self.stream(query, params) as rows:
                    return rows.read_all()
            except _LeftOut:
                continue  # that file is left out now: the whole query again
        raise self._too_many()

    @contextmanager
    def stream(self, query: str, params: Params = None, *, until: float | None = None,
               materialize: bool = False) -> Iterator[Rows]:
        """The result of read-only `query` batch by batch (`Rows`: its `schema`, then its
        Arrow batches), under the same guard and limits as `sql()`, the deadline covering
        the whole iteration: `timeout_s` from now, or `until` (a `time.monotonic()` time,
        for a caller whose time limit began earlier). A file found unreadable before the
        first batch is left out and the query run again; found later, the error names it
        (later queries leave it out). `materialize`: the result is held by DuckDB instead
        (`Rows.relation`, for rendering as a table; no Arrow, no batches)."""
        with parsing_on(self._raw_cursor()):
            statements = check_read_only(query, self.limits.max_query_bytes)
        until = time.monotonic() + self.limits.timeout_s if until is None else until
        for _ in range(_MAX_LEFT_OUT_PER_QUERY):
            cur = self._raw_cursor()
            with deadline(cur, until - time.monotonic()) as fired:
                rows = Rows(self.limits, self._translate, fired)
                try:
                    rows.start(cur, statements, params, materialize)
                except _Unreadable as bad:
                    self._leave_out(bad.rel, bad.problem)
                    continue
                try:
                    yield rows
                except _Unreadable as bad:
                    self._leave_out(bad.rel, bad.problem)
                    raise _LeftOut(f"{bad.problem.message}; run the query again") from None
                return
        raise self._too_many()

    def _too_many(self) -> SchemaError:
        return SchemaError(f"more than {_MAX_LEFT_OUT_PER_QUERY} unreadable Parquet files in "
                           f"{self.store.url}; see Catalog.problems")

    def _leave_out(self, rel: str, problem: Problem) -> None:
        """Rebuild the views from the same snapshot without the file a query could not read."""
        with self._lock:
            snap, left_out = self._snap, dict(self._left_out)
        assert snap is not None, "a query ran before the catalog opened"
        left_out[rel] = problem
        self._install(snap, left_out)

    def df(self, query: str, params: Params = None):
        """`sql()` as a pandas DataFrame."""
        return self.sql(query, params).to_pandas()

    def tables(self) -> list[str]:
        """Names of the views users query."""
        rows = self._raw_cursor().execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal "
            "AND NOT starts_with(view_name, '_af_') ORDER BY 1").fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        with self._lock:
            for con in (self._con, self._first):  # `_first`: opening failed before its views
                if con is not None:
                    con.close()
            self._con = self._first = None
            self._generation += 1
        self._cleanup()

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _translate(self, exc: duckdb.Error, statement: str, timed_out: bool) -> Exception:
        """A one-line error of ours naming the statement, the limit hit or the corrupt file."""
        first, short_text = connection.first_line(exc), short(statement)
        if timed_out and isinstance(exc, duckdb.InterruptException):
            return QueryLimit(f"SQL stopped: `{short_text}` ran past the {self.limits.timeout_s:g} s "
                              "time limit (--timeout SECONDS; SqlLimits(timeout_s=...))")
        if isinstance(exc, duckdb.OutOfMemoryException):
            size = human_bytes(self.limits.memory_bytes)
            return QueryLimit(f"SQL stopped: `{short_text}` needs more than the {size} memory limit "
                              f"(--memory-limit SIZE|PERCENT; SqlLimits(memory=...))")
        if isinstance(exc, duckdb.PermissionException):
            return SqlRefused(f"SQL refused: `{short_text}` reaches outside the store's committed "
                              f"files ({first})")
        if isinstance(exc, _FILE_ERRORS):
            files = self._built.files_by_name if self._built else {}
            rel = connection.file_in_message(str(exc), files)
            if rel is not None and rel not in self._left_out:
                return _Unreadable(rel, Problem(rel, run_of(rel),
                                                connection.unreadable(self.store, rel, exc)))
        return ConfigError(f"SQL error in `{short_text}`: {first}")
