"""Write a query result as a table, CSV, JSON or Parquet (for `alignflow sql`).

A file named by `--out` is never inside the store (a result written over a committed
Parquet file would silently replace a run's rows) and never replaces an existing file
unless `force` is given; then it is replaced atomically, so a link is swapped, not written
through.
"""

from __future__ import annotations

import io
import json
import os
import sys
import tempfile
from collections.abc import Callable
from typing import IO, Literal, get_args

import duckdb
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from alignflow.artifacts.store import Store
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


def check_outside_store(out: str, store: Store | None, flag: str = "--out") -> str:
    """`out` as an absolute path; refused when it, or where its links lead, is in the store."""
    path = os.path.abspath(os.path.expanduser(out))
    if store is not None and store.is_local:
        roots = {os.path.abspath(store.root), os.path.realpath(store.root)}
        for candidate in (path, os.path.realpath(path)):
            if any(candidate == r or candidate.startswith(r + os.sep) for r in roots):
                raise ConfigError(f"{flag} {out}: inside the store {store.url}; the store holds "
                                  "only what runs commit, write results outside it")
    return path


def check_out_path(out: str, store: Store | None, force: bool, flag: str = "--out") -> str:
    """`out` as an absolute path, if it may be written: outside the store, and new unless
    `force`. Both the path as given and with links resolved are checked."""
    path = check_outside_store(out, store, flag)
    if os.path.isdir(path):
        raise ConfigError(f"{flag} {out}: is a folder; expected a file name")
    if os.path.lexists(path) and not force:
        raise ConfigError(f"{flag} {out}: the file exists; pass --force to replace it")
    if not os.path.isdir(os.path.dirname(path)):
        raise ConfigError(f"{flag} {out}: no folder {os.path.dirname(path)}")
    return path


def write_file(path: str, write: Callable[[IO[bytes]], None], force: bool) -> None:
    """Create `path` with `write(file)`: exclusively when not `force`, else through a temp
    file in the same folder renamed over it."""
    if not force:
        with open(path, "xb") as f:
            write(f)
        return
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain new file, not mkstemp's 0600
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def write_result(table: pa.Table, fmt: Format, out: str | None = None,
                 stream: IO[str] | None = None, *, store: Store | None = None,
                 force: bool = False) -> None:
    """Write `table` to `out` (a file outside `store`) or `stream` (default stdout)."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "parquet" and not out:
        raise ConfigError("--format parquet needs --out FILE (Parquet is binary)")
    if not out:
        (stream or sys.stdout).write(to_text(table, fmt))
        return
    path = check_out_path(out, store, force)
    if fmt == "parquet":
        write_file(path, lambda f: pq.write_table(table, f), force)
    else:
        data = to_text(table, fmt).encode("utf-8")
        write_file(path, lambda f: f.write(data), force)
