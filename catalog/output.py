"""Write a query result as a table, CSV, JSON or Parquet (for `alignflow sql`)."""

from __future__ import annotations

import io
import json
import sys
from typing import IO, Literal, get_args

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from alignflow.errors import ConfigError

Format = Literal["table", "csv", "json", "parquet"]
FORMATS: tuple[str, ...] = get_args(Format)


def render_table(table: pa.Table) -> str:
    """DuckDB's own box rendering (column types, middle rows elided) of an Arrow table."""
    con = duckdb.connect(":memory:")
    try:
        return str(con.from_arrow(table))
    finally:
        con.close()


def to_text(table: pa.Table, fmt: Format) -> str:
    """The result in a text format (table, csv or json)."""
    if fmt == "table":
        return render_table(table)
    if fmt == "csv":
        buf = io.BytesIO()
        pacsv.write_csv(table, buf)
        return buf.getvalue().decode()
    if fmt == "json":
        return json.dumps(table.to_pylist(), default=str, ensure_ascii=False) + "\n"
    raise ConfigError(f"--format {fmt!r} is not a text format; expected one of table, csv, json")


def write_result(table: pa.Table, fmt: Format, out: str | None = None,
                 stream: IO[str] | None = None) -> None:
    """Write `table` to `out` (a file) or `stream` (default stdout)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "parquet":
        if not out:
            raise ConfigError("--format parquet needs --out FILE (Parquet is binary)")
        pq.write_table(table, out)
        return
    text = to_text(table, fmt)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        (stream or sys.stdout).write(text)
