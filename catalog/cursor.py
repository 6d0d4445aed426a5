"""A DB-API-like cursor over `Catalog.sql()`, so `Catalog.cursor()` is guarded too.

DuckDB's own cursor would run any statement the locked connection still allows (creating
in-memory tables, `COPY` onto a committed file through `allowed_paths`) and hand out
relation objects that can write. This one only runs what `sql()` runs: the read-only guard
and the time and memory limits apply, and results come back as rows or Arrow.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

Params = Sequence[Any] | dict[str, Any] | None


class GuardedCursor:
    """`execute(query, params)` then `fetchall()` / `fetchone()` / `fetchmany()` /
    `fetch_arrow_table()` / `df()`; `description` names the result columns. `run_sql` is
    the catalog's `sql()`."""

    def __init__(self, run_sql: Callable[[str, Params], pa.Table]) -> None:
        self._run_sql = run_sql
        self._result: pa.Table | None = None
        self._rows: list[tuple] = []
        self._pos = 0

    def execute(self, query: str, params: Params = None) -> GuardedCursor:
        self._result = self._run_sql(query, params)
        columns = [c.to_pylist() for c in self._result.columns]
        self._rows = list(zip(*columns, strict=True)) if columns else []
        self._pos = 0
        return self

    @property
    def description(self) -> list[tuple] | None:
        if self._result is None:
            return None
        return [(f.name, str(f.type), None, None, None, None, None) for f in self._result.schema]

    def fetchone(self) -> tuple | None:
        rows = self.fetchmany(1)
        return rows[0] if rows else None

    def fetchmany(self, size: int = 1) -> list[tuple]:
        rows = self._rows[self._pos : self._pos + size]
        self._pos += len(rows)
        return rows

    def fetchall(self) -> list[tuple]:
        return self.fetchmany(len(self._rows) - self._pos)

    def fetch_arrow_table(self) -> pa.Table:
        if self._result is None:
            raise ValueError("no result: call execute() first")
        return self._result

    def df(self):
        return self.fetch_arrow_table().to_pandas()

    def close(self) -> None:
        self._result, self._rows, self._pos = None, [], 0
