"""Parquet files too big to describe are left out before a view is built over them.

DuckDB binds a view in time that grows with the square of its columns: over one committed
file of 100,000 columns, opening a catalog took a minute here (29 in the issue), in one
statement that neither the deadline nor a signal can interrupt; and parsing that file's
18 MB footer alone took 224 MB. So cheap checks come first, each naming the file it leaves
out in one line:

- before anything parses a footer, from the file's last bytes (one ranged read, and one
  of 64 bytes at the footer's start where the first did not reach it): the footer is at most
  `MAX_FOOTER_BYTES`, and the number of schema elements it declares (the size of
  FileMetaData's second field, a Thrift list, read from its header) at most `MAX_COLUMNS`;
- then, from the footers DuckDB has read and cached (`parquet_schema`): the files of one
  table together have at most `MAX_COLUMNS` distinct column names (a view is their union
  by name).

`MAX_COLUMNS` is 40 times the widest alignflow schema (rollouts, 26 columns); a view that
wide binds in milliseconds. Alignflow writes row groups of 64k rows or 64 MiB, so its
footers stay under `MAX_FOOTER_BYTES` until a file passes about 100 GB; DuckDB parses a
footer into about 12 times its size in memory.
"""

from __future__ import annotations

from typing import Any

import duckdb

from alignflow.artifacts.store import Store
from alignflow.catalog.index import Index
from alignflow.catalog.manifests import Problem, Snapshot, run_of
from alignflow.catalog.paths import duckdb_path, literal

MAX_COLUMNS = 1_000
Columns = dict[str, tuple[int, set[str]]]  # rel -> (schema elements, column names)
MAX_FOOTER_BYTES = 8 * 2**20
_TAIL = 4096  # the first read: most alignflow footers (a few KiB) fit in it whole
_HEAD = 64  # enough for FileMetaData's first two field headers


def small_footers(store: Store, snap: Snapshot, rels: list[str],
                  problems: list[Problem]) -> list[str]:
    """The files of `rels` whose footer is at most `MAX_FOOTER_BYTES` and declares at most
    `MAX_COLUMNS` columns, read from their last bytes (concurrently on remote stores). A
    file that does not end as Parquet does is kept, for DuckDB to name as corrupt."""
    sizes = {rel: int(snap.listing[rel]["size"]) for rel in rels}
    tails = _read(store, {rel: (max(0, sizes[rel] - _TAIL), sizes[rel]) for rel in rels})
    footers = {rel: int.from_bytes(t[-8:-4], "little") for rel, t in tails.items()
               if len(t) >= 8 and t[-4:] == b"PAR1"}
    heads = {rel: tails[rel][-8 - n:-8][:_HEAD] for rel, n in footers.items()
             if n + 8 <= len(tails[rel])}
    far = {rel: (sizes[rel] - 8 - n, sizes[rel] - 8 - n + _HEAD) for rel, n in footers.items()
           if rel not in heads and n > 0 and n + 8 <= sizes[rel]}
    heads |= _read(store, far)
    kept = []
    for rel in rels:
        footer, columns = footers.get(rel, 0), _declared_columns(heads.get(rel, b""))
        if columns is not None and columns > MAX_COLUMNS:
            why = f"has {columns:,} columns (schema elements); a table has at most {MAX_COLUMNS:,}"
        elif footer > MAX_FOOTER_BYTES:
            why = f"has a footer of {footer:,} bytes; at most {MAX_FOOTER_BYTES:,} are read"
        else:
            kept.append(rel)
            continue
        problems.append(Problem(rel, run_of(rel), f"Parquet file {store.where(rel)} {why}; "
                                "left out"))
    return kept


def _read(store: Store, ranges: dict[str, tuple[int, int]]) -> dict[str, bytes]:
    """rel → the bytes of its (start, end) range; a file that cannot be read is skipped
    (the footer pass names it)."""
    if not ranges:
        return {}
    rels = list(ranges)
    got = store.fs.cat_ranges([store.path(r) for r in rels], [ranges[r][0] for r in rels],
                              [ranges[r][1] for r in rels], on_error="return")
    return {rel: data for rel, data in zip(rels, got, strict=True) if isinstance(data, bytes)}


def _declared_columns(head: bytes) -> int | None:
    """Columns (schema elements less the root) a footer declares, from its first bytes in
    Thrift's compact protocol: field 1 (version, an i32), then field 2 (schema, a list of
    structs) whose header holds its size. None when the bytes do not start that way."""
    try:
        if head[0] != 0x15:  # field 1, type i32
            return None
        pos = _varint(head, 1)[1]
        if head[pos] != 0x19 or head[pos + 1] & 0x0F != 0x0C:  # field 2, a list of structs
            return None
        size, pos = head[pos + 1] >> 4, pos + 2
        if size == 15:
            size = _varint(head, pos)[0]
        return max(0, size - 1)
    except IndexError:
        return None


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    """An unsigned LEB128 varint at `pos`: (value, the position after it)."""
    value = shift = 0
    while True:
        byte = data[pos]
        value |= (byte & 0x7F) << shift
        pos, shift = pos + 1, shift + 7
        if not byte & 0x80:
            return value, pos
        if shift > 63:
            raise IndexError("varint too long")


def narrow(store: Store, con: duckdb.DuckDBPyConnection, table: str, rels: list[str],
           problems: list[Problem], index: Index | None = None) -> tuple[list[str], Columns]:
    """The files of `rels` (in order) that keep table `table` within `MAX_COLUMNS`: alone,
    and together by column name, and what is known of their columns (rel -> (schema
    elements, names)). A footer DuckDB cannot read is left for the view to name. Column facts
    `index` holds for unchanged files are not read again; those read are put in it."""
    if not rels:
        return rels, {}
    known = {rel: f for rel in rels if (f := _cached(index, rel)) is not None}
    try:
        facts = _columns(store, con, [rel for rel in rels if rel not in known]) | known
    except duckdb.InterruptException:
        raise
    except duckdb.Error:
        return rels, {}
    seen: set[str] = set()
    kept = []
    for rel in rels:
        count, mine = facts.get(rel, (0, set()))
        if count > MAX_COLUMNS:
            why = f"has {count:,} schema elements (columns)"
        elif len(seen | mine) > MAX_COLUMNS:
            why = f"would widen table {table!r} past {MAX_COLUMNS:,} distinct columns"
        else:
            seen |= mine
            kept.append(rel)
            if index is not None and rel not in known and rel in facts:
                index.put(rel, "columns", [count, sorted(mine)])
            continue
        problems.append(Problem(rel, run_of(rel), f"Parquet file {store.where(rel)} {why}; a "
                                f"table has at most {MAX_COLUMNS:,}; left out"))
    return kept, facts


def _cached(index: Index | None, rel: str) -> tuple[int, set[str]] | None:
    """(schema elements, column names) of an unchanged file, from `index`."""
    fact = index.get(rel, "columns") if index else None
    if (isinstance(fact, list) and len(fact) == 2 and isinstance(fact[0], int)
            and isinstance(fact[1], list) and all(isinstance(n, str) for n in fact[1])):
        return fact[0], set(fact[1])
    return None


def _columns(store: Store, con: duckdb.DuckDBPyConnection,
             rels: list[str]) -> Columns:
    """rel -> (schema elements, its column names; none read for a file past `MAX_COLUMNS`)."""
    if not rels:
        return {}
    by_path = {duckdb_path(store, rel): rel for rel in rels}
    files = "[" + ", ".join(literal(p) for p in by_path) + "]"
    counts = dict(con.execute(f"SELECT file_name, count(*) FROM parquet_schema({files}) "
                              "GROUP BY ALL").fetchall())
    names = _names(con, [p for p in by_path if counts.get(p, 0) <= MAX_COLUMNS])
    return {rel: (counts.get(path, 0), names.get(path, set())) for path, rel in by_path.items()
            if path in counts}


def _names(con: duckdb.DuckDBPyConnection, paths: list[str]) -> dict[str, Any]:
    """File → the set of its schema element names (files already known to be narrow)."""
    if not paths:
        return {}
    files = "[" + ", ".join(literal(p) for p in paths) + "]"
    rows = con.execute(f"SELECT file_name, list(DISTINCT name) FROM parquet_schema({files}) "
                       "GROUP BY ALL").fetchall()
    return {path: set(names) for path, names in rows}
