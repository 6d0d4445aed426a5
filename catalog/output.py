"""Write a query result as a table, CSV, JSON or Parquet (for `alignflow sql`).

CSV, JSON and Parquet are written batch by batch as the query streams them
(`Catalog.stream`), so a big result never sits whole in memory; `table` is for people and
renders DuckDB's box of a result kept within the row and byte caps. A file named by `--out`
is never inside a store, this one or any other (a result written over a committed Parquet
file would replace a run's rows), and never replaces an existing file unless `force` is
given. It is written to a temp file beside it and renamed into place only once complete, so
a query that fails half-way (a cap, the deadline) leaves no partial file, and a link at the
name is swapped, not written through.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from typing import IO, TYPE_CHECKING, Literal, get_args

from alignflow.artifacts.layout import enclosing_store
from alignflow.artifacts.store import Store
from alignflow.catalog import guard
from alignflow.errors import ConfigError

if TYPE_CHECKING:
    import duckdb
    import pyarrow as pa

Format = Literal["table", "csv", "json", "parquet"]
FORMATS: tuple[str, ...] = get_args(Format)
_JSON_ROWS = 1024  # rows turned into Python objects at a time
_GROUP_ROWS, _GROUP_BYTES = 65_536, 16 * 2**20  # a Parquet row group of --out, at most


WHOLE_ROWS = 100  # a result this short is shown whole (a DESCRIBE, a `.schema` of a view)


def render_table(table: pa.Table) -> str:
    """DuckDB's own box rendering (column types) of an Arrow table: whole up to
    `WHOLE_ROWS` rows, else with the middle rows elided."""
    con = guard.scratch()  # not a database of its own (~0.04 CPU s each)
    try:
        return render_relation(con.from_arrow(table), table.num_rows)
    finally:
        con.close()


def render_relation(rel: duckdb.DuckDBPyRelation, rows: int) -> str:
    """DuckDB's box of a result of `rows` rows (materialized, or Arrow), as `render_table`;
    no Arrow is made (`alignflow sql` imports no pyarrow for its default format)."""
    if rows > WHOLE_ROWS:
        return str(rel)
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rel.show(max_rows=WHOLE_ROWS)
    return buf.getvalue().removesuffix("\n")


def _table_text(schema: pa.Schema | None, batches: Iterable[pa.RecordBatch]) -> str:
    """The box of a result: of its materialized relation (`Rows` of a `stream(...,
    materialize=True)`), else of its Arrow batches."""
    relation = getattr(batches, "relation", None)
    if relation is not None:
        return render_relation(relation, getattr(batches, "rows", 0))
    import pyarrow as pa

    return render_table(pa.Table.from_batches(list(batches), schema))


def to_text(table: pa.Table, fmt: Format) -> str:
    """The result in a text format (table, csv or json)."""
    if fmt == "table":
        return render_table(table)
    if fmt not in ("csv", "json"):
        raise ConfigError(f"--format {fmt!r} is not a text format; expected one of table, csv, "
                          "json")
    buf = io.BytesIO()
    write_batches(table.schema, table.to_batches(), fmt, buf)
    return buf.getvalue().decode()


def write_batches(schema: pa.Schema, batches: Iterable[pa.RecordBatch], fmt: Format,
                  sink: IO[bytes]) -> None:
    """Write `batches` to the binary `sink` as csv, json (one array of objects) or parquet,
    one batch at a time."""
    if fmt == "csv":
        import pyarrow.csv as pacsv

        with pacsv.CSVWriter(sink, schema) as writer:
            for batch in batches:
                writer.write_batch(batch)
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        with pq.ParquetWriter(sink, schema) as writer:
            for group in _row_groups(batches):
                writer.write_table(group)  # one row group
    else:
        sep = b"["
        for batch in batches:
            for start in range(0, batch.num_rows, _JSON_ROWS):
                for row in batch.slice(start, _JSON_ROWS).to_pylist():
                    sink.write(sep + json.dumps(row, default=str, ensure_ascii=False).encode())
                    sep = b", "
        sink.write(b"[]\n" if sep == b"[" else b"]\n")


def _row_groups(batches: Iterable[pa.RecordBatch]) -> Iterator[pa.Table]:
    """Small batches joined into row groups of `_GROUP_ROWS` rows or `_GROUP_BYTES` (a
    Parquet row group per small batch would make a slow file with a huge footer)."""
    import pyarrow as pa

    held: list[pa.RecordBatch] = []
    rows = size = 0
    for batch in batches:
        held.append(batch)
        rows, size = rows + batch.num_rows, size + batch.nbytes
        if rows >= _GROUP_ROWS or size >= _GROUP_BYTES:
            yield pa.Table.from_batches(held)
            held, rows, size = [], 0, 0
    if rows:
        yield pa.Table.from_batches(held)


def check_outside_store(out: str, store: Store | None, flag: str = "--out") -> str:
    """`out` as an absolute path; refused when it, or where its links lead, is inside a
    store: the one queried, or any folder laid out as a store (artifacts/layout.py)."""
    path = os.path.abspath(os.path.expanduser(out))
    roots = set()
    if store is not None and store.is_local:
        roots = {os.path.abspath(store.root), os.path.realpath(store.root)}
    for candidate in (path, os.path.realpath(path)):
        if any(candidate == r or candidate.startswith(r + os.sep) for r in roots):
            raise ConfigError(f"{flag} {out}: inside the store {store and store.url}; the store holds "
                              "only what runs commit, write results outside it")
    other = enclosing_store(path)
    if other is not None:
        raise ConfigError(f"{flag} {out}: inside the store {other} (it holds runs/); a store "
                          "holds only what runs commit, write results outside it")
    return path


def check_out_path(out: str, store: Store | None, force: bool, flag: str = "--out") -> str:
    """`out` as an absolute path, if it may be written: outside every store, and new unless
    `force`. Both the path as given and with links resolved are checked."""
    path = check_outside_store(out, store, flag)
    if os.path.isdir(path):
        raise ConfigError(f"{flag} {out}: is a folder; expected a file name")
    if os.path.lexists(path) and not force:
        raise ConfigError(f"{flag} {out}: the file exists; pass --force to replace it")
    if not os.path.isdir(os.path.dirname(path)):
        raise ConfigError(f"{flag} {out}: no folder {os.path.dirname(path)}")
    return path


def write_file(path: str, write: Callable[[IO[bytes]], object], force: bool) -> None:
    """Create `path` with `write(file)` through a temp file in the same folder, put in place
    only once complete: renamed over `path` with `force`, else linked (never replacing)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a plain new file, not mkstemp's 0600
        if force:
            os.replace(tmp, path)
        else:
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise ConfigError(f"--out {path}: the file exists; pass --force to replace "
                                  "it") from None
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def write_result(table: pa.Table, fmt: Format, out: str | None = None,
                 stream: IO[str] | None = None, *, store: Store | None = None,
                 force: bool = False) -> None:
    """Write `table` to `out` (a file outside every store) or `stream` (default stdout)."""
    write_rows(table.schema, table.to_batches(), fmt, out, stream, store=store, force=force)


def write_rows(schema: pa.Schema, batches: Iterable[pa.RecordBatch], fmt: Format,
               out: str | None = None, stream: IO[str] | None = None, *,
               store: Store | None = None, force: bool = False) -> None:
    """Write a result given as batches, streamed (csv/json/parquet) to `out` or `stream`."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: expected one of {', '.join(FORMATS)}")
    if fmt == "parquet" and not out:
        raise ConfigError("--format parquet needs --out FILE (Parquet is binary)")
    if out:
        path = check_out_path(out, store, force)
        if fmt == "table":
            text = _table_text(schema, batches).encode()
            write_file(path, lambda f: f.write(text), force)
        else:
            write_file(path, lambda f: write_batches(schema, batches, fmt, f), force)
        return
    stream = stream or sys.stdout
    if fmt == "table":
        stream.write(_table_text(schema, batches))
        return
    stream.flush()
    sink = getattr(stream, "buffer", None)
    if sink is None:  # a text stream without bytes underneath (a test's StringIO)
        buf = io.BytesIO()
        write_batches(schema, batches, fmt, buf)
        stream.write(buf.getvalue().decode())
        return
    write_batches(schema, batches, fmt, sink)
    sink.flush()
