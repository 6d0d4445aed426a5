"""Opening a catalog is bounded like a query (issue 40 §6): a committed Parquet file too
wide to describe is named and left out before any view is built over it, the time limit
covers building the views, and the memory limits are set before the first view."""

from __future__ import annotations

import contextlib
import os
import resource
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from alignflow.artifacts import schemas
from alignflow.artifacts.commit import commit
from alignflow.catalog import connection, limits, process, shape
from alignflow.catalog.catalog import Catalog
from alignflow.catalog.limits import SqlLimits
from alignflow.cli import main
from alignflow.errors import QueryLimit
from tests.fast.test_catalog_data import populate

pytestmark = pytest.mark.timeout(120)
ENDLESS = "SELECT count(*) AS n FROM range(100000000000) a"
WIDE = 50_000  # columns: before the checks, opening took 13 s here (quadratic in columns)


@pytest.fixture
def store(local_store):
    populate(local_store)
    return local_store


def commit_rollouts(store, run_id: str, columns: dict[str, pa.Array], name: str) -> str:
    """Commit one rollouts file of `columns` (plus run_id and iteration) under a manifest
    that matches it (rows, bytes, schema), as a writer that means harm would; its path."""
    meta = schemas.get("rollouts")
    rel = f"runs/{run_id}/rollouts/iter=0/generate-{name}.parquet"
    table = pa.table({"run_id": [run_id], "iteration": pa.array([0], pa.int64()), **columns})
    os.makedirs(os.path.dirname(store.path(rel)), exist_ok=True)
    pq.write_table(table.replace_schema_metadata(meta.metadata), store.path(rel))
    store.write_json(f"runs/{run_id}/run.json", {"run_id": run_id, "status": "SUCCESSFUL"})
    commit(store, run_id, f"iter-0000/generate-{name}", {"artifacts": [{
        "table": "rollouts", "path": rel, "rows": 1, "schema": meta.name,
        "schema_version": meta.version, "bytes": os.path.getsize(store.path(rel))}]})
    return rel


def _ints(prefix: str, n: int) -> dict[str, pa.Array]:
    return {f"{prefix}{i}": pa.array([i], pa.int32()) for i in range(n)}


def test_a_wide_file_is_named_and_left_out_within_the_deadline(store, capsys):
    rel = commit_rollouts(store, "r3", _ints("c", WIDE), "wide")
    timeout = 5.0
    start = time.monotonic()
    code = main(["sql", "SELECT run_id, count(*) AS n FROM rollouts GROUP BY 1 ORDER BY 1",
                 "--store", store.url, "--format", "csv", "--timeout", str(timeout)])
    elapsed = time.monotonic() - start
    out, err = capsys.readouterr()
    assert (code, out) == (0, '"run_id","n"\n"r1",6\n"r2",6\n')
    assert err == (f"warning: Parquet file {store.url}/{rel} has {WIDE + 2:,} columns (schema "
                   f"elements); a table has at most {shape.MAX_COLUMNS:,}; left out\n")
    assert elapsed < timeout + process.GRACE_S  # the command's bound, met without force


def test_files_that_together_are_too_wide_leave_out_the_one_past_the_bound(store):
    half = shape.MAX_COLUMNS * 3 // 5  # each file alone is narrow, the two together not
    first = commit_rollouts(store, "r3", _ints("a", half), "a")
    second = commit_rollouts(store, "r4", _ints("b", half), "b")
    with Catalog(store) as cat:
        problems = {p.path: p.message for p in cat.problems}
        assert first not in problems
        assert problems[second] == (f"Parquet file {store.url}/{second} would widen table "
                                    f"'rollouts' past {shape.MAX_COLUMNS:,} distinct columns; "
                                    f"a table has at most {shape.MAX_COLUMNS:,}; left out")
        got = cat.sql("SELECT run_id, count(*) AS n FROM rollouts GROUP BY 1 ORDER BY 1")
        assert got.to_pylist() == [{"run_id": "r1", "n": 6}, {"run_id": "r2", "n": 6},
                                   {"run_id": "r3", "n": 1}]


def test_the_declared_column_count_is_read_without_parsing_the_footer(store):
    rel = commit_rollouts(store, "r3", _ints("c", 20), "narrow")
    data = Path(store.path(rel)).read_bytes()
    footer = int.from_bytes(data[-8:-4], "little")
    assert shape._declared_columns(data[-8 - footer:-8][:64]) == 22  # 20 + run_id, iteration
    assert shape._declared_columns(b"\x00garbage") is None


def test_the_time_limit_covers_building_the_views(store, monkeypatch):
    monkeypatch.setattr(connection, "METRICS_VIEW", ENDLESS)  # a view that never ends
    timeout = 0.5
    start = time.monotonic()
    with pytest.raises(QueryLimit, match=r"^SQL stopped: opening the catalog of .+ ran past "
                                         r"the 0.5 s time limit while building the view "
                                         r"'rollouts' \(--timeout SECONDS"):
        Catalog(store, limits=SqlLimits(timeout_s=timeout))
    assert time.monotonic() - start < timeout + process.GRACE_S


def test_memory_limits_are_set_before_the_first_view(store, capsys, monkeypatch):
    caps, seen = [], []
    real_view, real_cap = connection._data_view, limits.cap_process_memory

    @contextlib.contextmanager
    def cap(sql_limits):
        with real_cap(sql_limits) as value:
            caps.append(value)
            yield value

    def view(store_, built, name, rels, view=None):
        setting = built.con.execute("SELECT current_setting('memory_limit')").fetchall()[0][0]
        seen.append((resource.getrlimit(resource.RLIMIT_DATA)[0], setting))
        return real_view(store_, built, name, rels, view)

    monkeypatch.setattr(limits, "cap_process_memory", cap)
    monkeypatch.setattr(connection, "_data_view", view)
    assert main(["sql", "SELECT 1 AS x", "--store", store.url, "--format", "csv",
                 "--memory-limit", "256MiB"]) == 0
    assert capsys.readouterr().out == '"x"\n1\n'
    [capped] = caps
    assert capped is not None and seen
    assert seen == [(capped, "256.0 MiB")] * len(seen)  # the process cap and DuckDB's limit
