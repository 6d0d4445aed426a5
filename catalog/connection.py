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

`allowed_paths` is bound as a parameter, not a literal list in SQL text (at 10,000 files,
1 MB of SQL to parse, ~0.1 CPU s). The generated rollouts are read without Hive
partitioning: their `iter=N` folder only repeats `iteration`, and parsing it per file cost
~0.3 CPU s per binding at 10,000 files. Nothing here imports pyarrow unless a view is empty
(issue 46: an `alignflow sql` costs little more than a bare DuckDB process).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import TYPE_CHECKING

import duckdb

from alignflow.artifacts.store import Store
from alignflow.catalog.deadline import steps
from alignflow.catalog.index import Index
from alignflow.catalog.limits import SqlLimits
from alignflow.catalog.limits import apply as apply_limits
from alignflow.catalog.manifests import Problem, Snapshot, run_of
from alignflow.catalog.paths import duckdb_path, file_in_message, literal
from alignflow.catalog.rollouts import (
    GENERATED,
    METRICS_RAW,
    METRICS_VIEW,
    STEP_COLUMNS,
    STEP_ONLY_COLUMNS,
    rollouts_view_sql,
)
from alignflow.catalog.rows import RUNS_COLUMNS, TASKS_COLUMNS, load_rows
from alignflow.catalog.shape import Columns, narrow
from alignflow.catalog.verify import verified
from alignflow.errors import QueryLimit

if TYPE_CHECKING:
    import pyarrow as pa

# lineage.INPUTS and lineage.ROUNDS by name (importing lineage imports pyarrow; a test
# checks the names agree)
DATA_TABLES = ("rollouts", "preferences", "sft_samples", "metrics", "checkpoints",
               "campaign_inputs", "campaign_rounds")
_CAMPAIGN_VIEWS = {"rounds", "campaigns"}  # campaigns.sql, over `runs` and campaign rounds
_OWN_VIEWS = {"runs", "tasks", "eval_results", "memory_peaks", *_CAMPAIGN_VIEWS}  # not over one table's files


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
    same_columns: set[str] = field(default_factory=set)  # tables whose files agree on columns


def build(store: Store, snap: Snapshot, limits: SqlLimits, temp_dir: str,
          left_out: dict[str, Problem] | None = None, *, seconds: float | None = None,
          index: Index | None = None, names: set[str] | None = None,
          con: duckdb.DuckDBPyConnection | None = None) -> Built:
    """A locked connection with the views over the committed files of `snap`, less the
    files in `left_out` (found unreadable by an earlier query: path → its problem): all of
    them, or only those a query `names` needs (`plan`). The limits are set before any file is
    read, and the whole build is bounded by `seconds` (default the time limit): past it,
    `QueryLimit` naming the step it was at. `index` spares re-checking unchanged files. `con`:
    a fresh in-memory connection to build in (else one is made)."""
    left_out = left_out or {}
    tables, runs, tasks = plan(snap, names)
    by_name = {rel.rsplit("/", 1)[-1]: rel for rels in snap.files.values() for rel in rels}
    built = Built(con or duckdb.connect(":memory:"), by_name, list(left_out.values()))
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
            allowed = _views(store, snap, built, left_out, step, tables, index)
            step("loading the runs and tasks tables")
            _runs_and_tasks(built, snap, runs, tasks)
            step("locking the connection")
            _lock(con, allowed)
    except BaseException:
        con.close()
        raise
    return built


def plan(snap: Snapshot, names: set[str] | None) -> tuple[list[str], bool, bool]:
    """(the data tables to build, whether `runs`, whether `tasks`) for a query naming the
    views `names` (lower case). Everything when names is None, names no view, or names one
    this catalog does not know (the error is then DuckDB's); `runs` (whose `problem` column
    names every file left out) and the campaign views need every data table."""
    data = sorted(set(DATA_TABLES) | set(snap.files))
    every = (data, True, True)
    if not names or not names <= {*data, *_OWN_VIEWS} or names & {"runs", *_CAMPAIGN_VIEWS}:
        return every
    tables = set(names) - _OWN_VIEWS
    if "rollouts" in names:  # the step tables it joins, where committed (else not joined)
        tables |= {t for t in (*STEP_COLUMNS, *STEP_ONLY_COLUMNS) if snap.files.get(t)}
    if "eval_results" in names:
        tables |= {"eval_samples", "eval_scores"}
    if "memory_peaks" in names:
        tables |= {"metrics"}
    return sorted(tables & set(data)), False, "tasks" in names


def _views(store: Store, snap: Snapshot, built: Built, left_out: dict[str, Problem],
           step: Callable[[str], None], tables: list[str], index: Index | None) -> list[str]:
    """Create the data views of `tables` (each over the files that pass `verified` and
    `narrow`), `metrics` and `rollouts` among them; the files they read."""
    con = built.con
    allowed: list[str] = []
    served: set[str] = set()  # tables with at least one readable file
    joins = {*STEP_COLUMNS, *STEP_ONLY_COLUMNS} & set(tables)  # else rollouts is the files
    for name in tables:
        step(f"building the view {name!r}")
        view = {"rollouts": GENERATED if joins else name, "metrics": METRICS_RAW}.get(name, name)
        rels = [r for r in snap.files.get(name, []) if r not in left_out]
        rels = _checked(store, snap, built, name, rels, index)
        rels = _data_view(store, built, name, rels, view)
        allowed += [duckdb_path(store, rel) for rel in rels]
        served |= {name} if rels else set()
    step("building the view 'rollouts'")
    if "metrics" in tables:
        con.execute(METRICS_VIEW)  # old runs' metric names in the one namespace
        con.execute(sql_text("memory_peaks"))  # planned beside measured, per task
    if "rollouts" in tables and joins:  # a view over a view binds its files twice
        con.execute(rollouts_view_sql(served))
    if {"eval_samples", "eval_scores"} <= set(tables):
        _eval_results(con)
    return allowed


def _checked(store: Store, snap: Snapshot, built: Built, name: str, rels: list[str],
             index: Index | None) -> list[str]:
    """The files of table `name` that pass `verified` and `narrow` (and in
    `built.same_columns` whether they agree on columns). Where every file passed at an
    earlier opening with the same files, listed and recorded alike, that is reused from the
    index's summary instead of checking each file again."""
    digest = index.digest(rels, snap.refs) if index is not None and rels else None
    same = index.summary(f"table/{name}", digest) if index is not None else None
    if same is not None and index is not None:
        index.carry(rels)
    else:
        before = len(built.problems)
        kept = verified(store, built.con, snap, rels, built.problems, unreadable, index)
        kept, columns = narrow(store, built.con, name, kept, built.problems, index)
        same = _one_shape(snap, kept, columns)
        if index is not None and kept == rels and len(built.problems) == before:
            index.put_summary(f"table/{name}", digest, same)
        rels = kept
    if same:
        built.same_columns.add(name)
    return rels


def _eval_results(con: duckdb.DuckDBPyConnection) -> None:
    """The `eval_results` view (eval answers with their reward and correctness); runs
    written before `eval_scores.correct` existed read it as null."""
    columns = {d[0] for d in con.execute("SELECT * FROM eval_scores LIMIT 0").description}
    correct = "r.correct" if "correct" in columns else "CAST(NULL AS FLOAT)"
    con.execute(sql_text("eval_results").format(correct=correct))


def _one_shape(snap: Snapshot, rels: list[str], columns: Columns) -> bool:
    """Whether the files `rels` have the same columns (known for each) and schema version:
    then a view reads them without `union_by_name`, which binds by reading every footer
    (seconds at 10,000 files); DuckDB maps each file's columns by name to the first's."""
    shapes = {(columns[r][0], frozenset(columns[r][1]), snap.refs.get(r, {}).get("schema_version"))
              if r in columns else None for r in rels}
    return len(shapes) == 1 and None not in shapes


def _runs_and_tasks(built: Built, snap: Snapshot, runs: bool, tasks: bool) -> None:
    """The `tasks` view, and `runs` with the campaign views over it, where asked for."""
    con = built.con
    if tasks:
        load_rows(con, "_af_tasks", snap.tasks, TASKS_COLUMNS)
        con.execute(sql_text("tasks"))
    if runs:
        load_rows(con, "_af_runs", snap.runs_table(built.problems), RUNS_COLUMNS)
        con.execute(sql_text("runs"))
        for statement in con.extract_statements(sql_text("campaigns")):
            con.execute(statement)


def _empty_table(con: duckdb.DuckDBPyConnection, name: str, schema: pa.Schema) -> None:
    """Table `name` with `schema`'s columns and no rows, in the database (every cursor of it
    sees it). Through an empty batch reader: an Arrow table made here (`empty_table`,
    `pa.table`, `pa.array`) makes pyarrow import pandas, 0.3 CPU s of an `alignflow sql`."""
    import pyarrow as pa

    reader = pa.RecordBatchReader.from_batches(schema, [])
    con.execute(f"DROP TABLE IF EXISTS {name}")
    con.from_arrow(reader).create(name)


def _data_view(store: Store, built: Built, name: str, rels: list[str],
               view: str | None = None) -> list[str]:
    """Create view `view` (default `name`) over table `name`; a file DuckDB cannot read is
    left out as a `Problem` naming it, and the view serves the other files. Returns the
    files the view reads."""
    view = view or name
    rels = list(rels)
    while rels:
        files = "[" + ", ".join(literal(duckdb_path(store, r)) for r in rels) + "]"
        hive = "true" if name != "rollouts" and _partition_keys(rels) else "false"
        union = "false" if name in built.same_columns else "true"
        try:
            built.con.execute(sql_text("data").format(name=_ident(view), hive=hive, union=union,
                                                      files=files))
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
    _empty_table(built.con, source, _empty(name))
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


def _empty(name: str) -> pa.Schema:
    """The registered schema's columns (dictionaries decoded to their values)."""
    import pyarrow as pa

    from alignflow.artifacts import lineage, schemas  # noqa: F401 (lineage registers its tables)

    schema = schemas.SCHEMAS.get(name)
    if schema is None:  # a table only its writer knows: at least the key column
        return pa.schema([pa.field("run_id", pa.string())])
    return pa.schema([pa.field(f.name, f.type.value_type if pa.types.is_dictionary(f.type)
                               else f.type) for f in schema.arrow_schema])


def _partition_keys(rels: list[str]) -> set[str]:
    """The Hive keys of the files' `key=value` folders when every file has the same ones
    (else none: DuckDB errors on files that differ)."""
    keys = {tuple(p.split("=", 1)[0] for p in rel.split("/")[:-1] if "=" in p) for rel in rels}
    return set(next(iter(keys))) if len(keys) == 1 else set()


def _lock(con: duckdb.DuckDBPyConnection, allowed: list[str]) -> None:
    con.execute("SET allowed_paths = ?", [allowed])
    for statement in con.extract_statements(sql_text("lockdown")):
        con.execute(statement.query)


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
