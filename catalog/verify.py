"""Committed Parquet files are checked against their manifest before a view serves them.

A file under a committed name can be replaced after its commit (by hand, by a tool writing
into the store, by an `--out` aimed at the wrong folder); served as it is, it would return
wrong rows without a word. So a view reads a file only when it is a regular file reached
without a link, and its row count, alignflow schema (name and version, from the footer's
metadata) and size are the ones its manifest records. Sizes come from the scan's listing (no
extra I/O); a footer too big to parse is refused before anything reads it (`shape.py`);
footers are read by DuckDB in one parallel pass, which the views then find in its metadata
cache. A file that fails is left out, named in one line, and its run marked.
"""

from __future__ import annotations

from typing import Any

import duckdb

from alignflow.artifacts.store import Store
from alignflow.catalog.index import Index
from alignflow.catalog.manifests import Problem, Snapshot, run_of
from alignflow.catalog.paths import duckdb_path, file_in_message, literal
from alignflow.catalog.shape import small_footers

_FOOTERS = """
SELECT m.file_name, m.num_rows, k.name, k.version
FROM parquet_file_metadata({files}) m
LEFT JOIN (SELECT file_name,
                  max(value::VARCHAR) FILTER (WHERE key = '{name_key}'::BLOB) AS name,
                  max(value::VARCHAR) FILTER (WHERE key = '{version_key}'::BLOB) AS version
           FROM parquet_kv_metadata({files}) GROUP BY file_name) k USING (file_name)
"""


def verified(store: Store, con: duckdb.DuckDBPyConnection, snap: Snapshot, rels: list[str],
             problems: list[Problem], say: Any, index: Index | None = None) -> list[str]:
    """The files of `rels` that match their manifests; each other one becomes a `Problem`.
    `say(store, rel, exc)` words a file DuckDB cannot read (connection.unreadable). Footers
    `index` holds for unchanged files are not read again; those read are put in it."""
    named = {p.path for p in [*snap.problems, *problems]}  # already left out and named
    ok = []
    for rel in (r for r in rels if r not in named):
        why = _listed(store, snap, rel)
        if why is None:
            ok.append(rel)
        else:
            problems.append(Problem(rel, run_of(rel), why))
    known = {rel: f for rel in ok if (f := _cached(index, rel)) is not None}
    fresh = small_footers(store, snap, [rel for rel in ok if rel not in known], problems)
    footers = _footers(store, con, fresh, problems, say) | known
    kept = [rel for rel in ok if rel in footers and _matches(store, snap, rel, footers[rel],
                                                                problems)]
    for rel in (r for r in kept if r not in known):
        if index is not None and (footer := footers[rel]) is not None:
            index.put(rel, "footer", list(footer))
    return kept


def _cached(index: Index | None, rel: str) -> tuple | None:
    """(rows, schema name, schema version) of an unchanged file, from `index`."""
    fact = index.get(rel, "footer") if index else None
    if (isinstance(fact, list) and len(fact) == 3 and isinstance(fact[0], int)
            and all(v is None or isinstance(v, str) for v in fact[1:])):
        return tuple(fact)
    return None


def _listed(store: Store, snap: Snapshot, rel: str) -> str | None:
    """Why `rel` cannot be read as listed (missing, or not a regular file), or None."""
    entry = snap.listing.get(rel)
    if entry is None:
        try:  # locally, say which folder on the way is a link; else it is missing
            if store.is_local:
                store.readable_path(rel)
        except (OSError, ValueError) as exc:
            if not isinstance(exc, FileNotFoundError):
                return f"{_line(exc)}; left out"
        return f"committed Parquet file {store.where(rel)} is missing; left out"
    if entry["type"] != "file":
        return (f"{store.where(rel)} is {entry['type']}; a store holds only regular files and "
                "folders, and alignflow never follows a link in it; left out")
    return None


def _footers(store: Store, con: duckdb.DuckDBPyConnection, rels: list[str],
             problems: list[Problem], say: Any) -> dict[str, tuple | None]:
    """rel -> (rows, schema name, schema version) from the footers (None for every file
    when DuckDB names none of them); a file whose footer cannot be read is a problem (and the
    pass is run again without it)."""
    if not rels:
        return {}
    from alignflow.artifacts.schemas import META_NAME, META_VERSION  # pyarrow: only here

    left = list(rels)
    while left:
        paths = {duckdb_path(store, rel): rel for rel in left}
        files = "[" + ", ".join(literal(p) for p in paths) + "]"
        query = _FOOTERS.format(files=files, name_key=META_NAME.decode(),
                                version_key=META_VERSION.decode())
        try:
            rows = con.execute(query).fetchall()
        except duckdb.InterruptException:
            raise
        except duckdb.Error as exc:
            bad = file_in_message(str(exc), {r.rsplit("/", 1)[-1]: r for r in left})
            if bad is None:  # no file named: let each view find its own bad file
                return {rel: None for rel in left}
            problems.append(Problem(bad, run_of(bad), say(store, bad, exc)))
            left.remove(bad)
            continue
        return {paths[name]: (n, schema, version) for name, n, schema, version in rows}
    return {}


def _matches(store: Store, snap: Snapshot, rel: str, footer: tuple | None,
             problems: list[Problem]) -> bool:
    """Whether the file's size, rows and schema are those its manifest records."""
    ref, size = snap.refs[rel], snap.listing[rel]["size"]
    got = {"bytes": size} if footer is None else {
        "bytes": size, "rows": footer[0], "schema": footer[1], "schema_version": footer[2]}
    wrong = [f"{k} {got[k]!r} (manifest: {ref.get(k)!r})" for k in got if got[k] != ref.get(k)]
    if wrong:
        problems.append(Problem(rel, run_of(rel), f"committed Parquet file {store.where(rel)} "
                                f"differs from its manifest: {', '.join(wrong)}; changed after "
                                "its commit, left out"))
    return not wrong


def _line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
