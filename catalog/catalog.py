"""`Catalog`: read-only SQL over the committed data of every run in a store.

    cat = Catalog("s3://bucket/runs-store")
    cat.sql("SELECT iteration, avg(reward) FROM rollouts WHERE run_id = ? GROUP BY 1", [rid])

Views: `runs`, `tasks`, `rollouts`, `preferences`, `sft_samples`, `metrics`, `checkpoints`
(plus any other table a manifest lists). They are a snapshot of what was committed when
the catalog was opened or last `refresh()`ed; user SQL passes the read-only guard first.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import duckdb
import pyarrow as pa

from alignflow.artifacts.store import Store
from alignflow.catalog import connection
from alignflow.catalog.guard import check_read_only, identifiers
from alignflow.catalog.manifests import scan
from alignflow.errors import ConfigError, SchemaError, SqlRefused

_FILE_ERRORS = (duckdb.IOException, duckdb.InvalidInputException, duckdb.SerializationException)


class Catalog:
    """DuckDB views over a store; one connection per catalog, one cursor per thread."""

    def __init__(self, store_or_url: Store | str | None = None, *,
                 storage_options: dict[str, Any] | None = None) -> None:
        if isinstance(store_or_url, Store):
            self.store = store_or_url
        else:
            self.store = Store.open(store_or_url, storage_options=storage_options)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._con: duckdb.DuckDBPyConnection | None = None
        self._generation = 0
        self._built: connection.Built | None = None
        self.refresh()

    def refresh(self) -> None:
        """Re-scan the manifests; later queries see everything committed up to now."""
        built = connection.build(self.store, scan(self.store))
        with self._lock:
            self._con, self._built = built.con, built
            self._generation += 1

    def cursor(self) -> duckdb.DuckDBPyConnection:
        """This thread's cursor on the current connection (DuckDB cursors are per thread)."""
        local = self._local
        if getattr(local, "generation", None) != self._generation:
            with self._lock:
                if self._con is None:
                    raise ConfigError("catalog is closed; open a new Catalog")
                local.cursor, local.generation = self._con.cursor(), self._generation
        return local.cursor

    def sql(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None) -> pa.Table:
        """Run read-only `query` (`?` placeholders bound from `params`); the last result."""
        statements = check_read_only(query)
        cur = self.cursor()
        self._check_broken(statements)
        for i, text in enumerate(statements):
            try:
                if i < len(statements) - 1:
                    cur.execute(text).complete()  # run for its errors; rows unused
                    continue
                return cur.sql(text, params=params).to_arrow_table()
            except duckdb.Error as exc:
                raise self._translate(exc, text) from None
        raise AssertionError("unreachable: check_read_only returns at least one statement")

    def df(self, query: str, params: Sequence[Any] | dict[str, Any] | None = None):
        """`sql()` as a pandas DataFrame."""
        return self.sql(query, params).to_pandas()

    def tables(self) -> list[str]:
        """Names of the views users query."""
        rows = self.cursor().execute(
            "SELECT view_name FROM duckdb_views() WHERE NOT internal "
            "AND NOT starts_with(view_name, '_af_') ORDER BY 1").fetchall()
        return [r[0] for r in rows]

    def close(self) -> None:
        with self._lock:
            if self._con is not None:
                self._con.close()
            self._con = None
            self._generation += 1

    def __enter__(self) -> Catalog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check_broken(self, statements: list[str]) -> None:
        """A query naming a table with an unreadable file fails, naming that file."""
        broken = self._built.broken if self._built else {}
        if broken:
            for text in statements:
                for name in identifiers(text) & set(broken):
                    raise SchemaError(broken[name])

    def _translate(self, exc: duckdb.Error, statement: str) -> Exception:
        """A one-line error of ours naming the statement, or the corrupt file."""
        first = connection.first_line(exc)
        short = " ".join(statement.split())[:80]
        if isinstance(exc, duckdb.PermissionException):
            return SqlRefused(f"SQL refused: `{short}` reaches outside the store's committed "
                              f"files ({first})")
        if isinstance(exc, _FILE_ERRORS):
            files = self._built.files_by_name if self._built else {}
            rel = connection.file_in_message(str(exc), files)
            if rel is not None:
                return SchemaError(f"corrupt or unreadable Parquet file {self.store.url}/{rel}: "
                                   f"{first}")
        return ConfigError(f"SQL error in `{short}`: {first}")
