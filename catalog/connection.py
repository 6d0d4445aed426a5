"""Build the catalog's own DuckDB connection: views first, then lock it down.

The database is in memory and belongs to one `Catalog` (never DuckDB's module-level default
connection). Local stores are read by DuckDB's native reader; other filesystems (S3,
memory) go through the store's fsspec filesystem registered with the connection, so no
DuckDB extension (httpfs) is needed. Threads, memory and the spill folder are set from
`SqlLimits` before any file is read, and the build runs under the time limit (`deadline.steps`).
A view reads only files that match their manifests (`verify.py`) and are not absurdly wide
(`shape.py`). Once the views exist, file access is limited to the committed files and the
configuration is locked: user SQL cannot read elsewhere, load extensions or undo the lock.
(DuckDB's `allowed_paths` would let a `COPY` write onto a committed file; the parser guard,
`guard.py`, is what refuses every writing statement.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources

import duckdb
import pyarrow as pa

from alignflow.artifacts import lineage, schemas
from alignflow.artifacts.store import Store
from alignflow.catalog.deadline import steps
from alignflow.catalog.limits import SqlLimits
from alignflow.catalog.limits import apply as apply_limits
from alignflow.catalog.manifests import Problem, Snapshot, run_of
from alignflow.catalog.paths import duckdb_path, file_in_message, literal
from alignflow.catalog.rollouts import GENERATED, METRICS_RAW, METRICS_VIEW, rollouts_view_sql
from alignflow.catalog.shape import narrow
from alignflow.catalog.verify import verified
from alignflow.errors import QueryLimit

DATA_TABLES = ("rollouts", "preferences", "sft_samples", "metrics", "checkpoints",
               lineage.INPUTS.name, lineage.ROUNDS.name)


def sql_text(name: str) -> str:
    """The text of `catalog/<name>.sql` (package data)."""
    return resources.files("alignflow.catalog").joinpath(f"{name}.sql").read_text()


@dataclass
class Built:
    """A locked connection, file name → store path (to name files in errors), and the data
    files left out because they could not be read or leave the store (`Problem`s)."""

    con: duckdb.DuckDBPyConnection
    files_by_name: dict[str, str]
    problems: list[Problem] = field(default_factory=list)


def build(store: Store, snap: Snapshot, limits: SqlLimits, temp_dir: str,
          left_out: dict[str, Problem] | None = None, *, seconds: float | None = None) -> Built:
    """A locked connection with all views over the committed files of `snap`, less the
    files in `left_out` (found unreadable by an earlier query: path → its problem). The
    limits are set before any file is read, and the whole build is bounded by `seconds`
    (default the time limit): past it, `QueryLimit` naming the step it was at."""
    left_out = left_out or {}
    by_name = {rel.rsplit("/", 1)[-1]: rel for rels in snap.files.values() for rel in rels}
    built = Built(duckdb.connect(":memory:"), by_name, list(left_out.values()))
    con = built.con

    def late(what: str) -> QueryLimit:
        return QueryLimit(f"SQL stopped: opening the catalog of {store.url} ran past the "
                          f"{limits.timeout_s:g} s time limit while {what} (--timeout SECONDS; "
                          "SqlLimits(timeout_s=...))")

    try:
        apply_limits(con, limits, temp_dir)  # memory, threads, spill folder: before any view
        con.execute("SET parquet_metadata_cache = true")
        if not store.is_local:
            con.register_filesystem(store.fs)
        with steps(con, limits.timeout_s if seconds is None else seconds, late) as step:
            allowed = _views(store, snap, built, left_out, step)
            step("loading the runs and tasks tables")
            _load_table(con, "_af_runs", snap.runs_table(built.problems))
            _load_table(con, "_af_tasks", snap.tasks)
            con.execute(sql_text("runs"))
            con.execute(sql_text("tasks"))
            for statement in duckdb.extract_statements(sql_text("campaigns")):
                con.execute(statement)
            step("locking the connection")
            _lock(con, allowed)
    except BaseException:
        con.close()
        raise
    return built


def _views(store: Store, snap: Snapshot, built: Built, left_out: dict[str, Problem],
           step: Callable[[str], None]) -> list[str]:
    """Create the data views (each over the files that pass `verified` and `narrow`) and
    `rollouts`; the files they read."""
    con = built.con
    allowed: list[str] = []
    served: set[str] = set()  # tables with at least one readable file
    for name in sorted(set(DATA_TABLES) | set(snap.files)):
        step(f"building the view {name!r}")
        view = {"rollouts": GENERATED, "metrics": METRICS_RAW}.get(name, name)
        rels = [r for r in snap.files.get(name, []) if r not in left_out]
        rels = verified(store, con, snap, rels, built.problems, unreadable)
        rels = narrow(store, con, name, rels, built.problems)
        rels = _data_view(store, built, name, rels, view)
        allowed += [duckdb_path(store, rel) for rel in rels]
        served |= {name} if rels else set()
    step("building the view 'rollouts'")
    con.execute(METRICS_VIEW)  # old runs' metric names in the one namespace
    generated = {r[0] for r in con.execute(f"DESCRIBE {GENERATED}").fetchall()}
    con.execute(rollouts_view_sql(served, hive="iter" in generated))
    return allowed


def _load_table(con: duckdb.DuckDBPyConnection, name: str, table: pa.Table) -> None:
    """Copy a small Arrow table into the database, so every cursor of it sees the rows."""
    con.register("_af_incoming", table)
    try:
        con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _af_incoming")
    finally:
        con.unregister("_af_incoming")


def _data_view(store: Store, built: Built, name: str, rels: list[str],
               view: str | None = None) -> list[str]:
    """Create view `view` (default `name`) over table `name`; a file DuckDB cannot read is
    left out as a `Problem` naming it, and the view serves the other files. Returns the
    files the view reads."""
    view = view or name
    rels = list(rels)
    while rels:
        files = "[" + ", ".join(literal(duckdb_path(store, r)) for r in rels) + "]"
        hive = "true" if _same_partition_keys(rels) else "false"
        try:
            built.con.execute(sql_text("data").format(name=_ident(view), files=files, hive=hive))
            return rels
        except duckdb.InterruptException:
            raise
        except duckdb.Error as exc:
            bad = file_in_message(str(exc), built.files_by_name)
            if bad is None or bad not in rels:  # not one file's fault: the table is left out
                built.problems.append(Problem(f"table {name}", None, f"cannot read table "
                                              f"{name!r} of {store.url}: {first_line(exc)}; "
                                              "left out"))
                break
            built.problems.append(Problem(bad, run_of(bad), unreadable(store, bad, exc)))
            rels.remove(bad)
    source = f"_af_empty_{name}"
    _load_table(built.con, source, _empty(name))
    built.con.execute(sql_text("empty").format(name=_ident(view), source=source))
    return []


def unreadable(store: Store, rel: str, exc: BaseException) -> str:
    """One line naming a committed Parquet file DuckDB could not read."""
    if "No files found" in str(exc):
        return f"committed Parquet file {store.url}/{rel} is missing; left out"
    return f"corrupt or unreadable Parquet file {store.url}/{rel}: {first_line(exc)}; left out"


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _empty(name: str) -> pa.Table:
    """No rows, with the registered schema's columns (dictionaries decoded to their values)."""
    schema = schemas.SCHEMAS.get(name)
    if schema is None:  # a table only its writer knows: at least the key column
        return pa.table({"run_id": pa.array([], pa.string())})
    fields = [pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type) else f.type)
              for f in schema.arrow_schema]
    return pa.schema(fields).empty_table()


def _same_partition_keys(rels: list[str]) -> bool:
    """Hive columns only when every file has the same `key=value` folders (else DuckDB errors)."""
    keys = {tuple(p.split("=", 1)[0] for p in rel.split("/")[:-1] if "=" in p) for rel in rels}
    return len(keys) == 1 and keys != {()}


def _lock(con: duckdb.DuckDBPyConnection, allowed: list[str]) -> None:
    con.execute(f"SET allowed_paths = [{', '.join(literal(p) for p in allowed)}]")
    for statement in duckdb.extract_statements(sql_text("lockdown")):
        con.execute(statement.query)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
