"""Issue 46, "SQL that opens in a blink": what lets `alignflow sql` answer at 10,000 tasks at
little more than a bare DuckDB process's cost. The index's per-table summary spares checking
every unchanged file again, and a tampered summary can only serve the files the manifests
list (never another, never one outside the store); a `rollouts` query binds its files once,
without Hive partitioning; the names the catalog keeps so as not to import pyarrow agree
with their homes; the table format renders without Arrow and keeps the row cap."""

from __future__ import annotations

import dataclasses
import json

import pytest

from alignflow.artifacts import lineage
from alignflow.artifacts.commit import ARTIFACT_FIELDS
from alignflow.artifacts.parquet_io import ArtifactRef
from alignflow.catalog import connection, index
from alignflow.catalog.catalog import Catalog
from alignflow.catalog.limits import SqlLimits
from alignflow.cli import main
from alignflow.errors import QueryLimit
from tests.fast import test_catalog_index

COUNT = "SELECT run_id, count(*) AS n FROM rollouts GROUP BY 1 ORDER BY 1"
FIRST = [{"run_id": "r1", "n": 6}, {"run_id": "r2", "n": 6}]


store = test_catalog_index.store  # a populated store with a private catalog cache


@pytest.fixture
def checks(monkeypatch) -> list[str]:
    """Tables whose files were checked one by one (`verify.verified`) from here on."""
    seen: list[str] = []
    real = connection.verified

    def verified(store, con, snap, rels, problems, say, index=None):
        seen.extend(sorted({snap.refs[r]["table"] for r in rels}))
        return real(store, con, snap, rels, problems, say, index)

    monkeypatch.setattr(connection, "verified", verified)
    return seen


def _rows(store, query: str = COUNT) -> list:
    with Catalog(store, for_query=query) as cat:
        return cat.sql(query).to_pylist()


def _doc(store) -> tuple[str, dict]:
    path = index.load(store.url).path
    with open(path) as f:
        return path, json.load(f)


def test_unchanged_tables_are_not_checked_file_by_file_again(store, checks):
    assert _rows(store) == FIRST and checks == ["rollouts"]
    checks.clear()
    assert _rows(store) == FIRST and checks == []
    assert _doc(store)[1]["summaries"]["table/rollouts"][1] is True


def test_a_changed_file_is_checked_again_and_left_out(store, checks):
    _rows(store)
    with Catalog(store) as cat:
        [path] = cat.sql("SELECT artifacts FROM tasks WHERE run_id = 'r1' AND task = "
                         "'generate' ORDER BY 1 LIMIT 1").to_pylist()[0].values()
    rel = json.loads(path)[0]["path"]
    store.write_bytes(rel, store.read_bytes(rel)[:-5] + b"xPAR1")  # other size, other bytes
    checks.clear()
    with Catalog(store) as cat:
        assert cat.sql(COUNT).to_pylist() == [{"run_id": "r1", "n": 3}, {"run_id": "r2", "n": 6}]
        assert any(p.path == rel for p in cat.problems)
    assert checks == ["rollouts"]
    assert "table/rollouts" not in _doc(store)[1]["summaries"]  # only clean tables


@pytest.mark.parametrize("summary", [
    ["0" * 64, True],  # another digest: the files changed since
    "../../etc/passwd", [None, True], ["x"], {"a": 1}, [1, 2, 3],
])
def test_a_tampered_summary_is_ignored(store, checks, summary):
    _rows(store)
    path, doc = _doc(store)
    doc["summaries"] = {"table/rollouts": summary, "table/../../x": [None, "/etc/passwd"]}
    with open(path, "w") as f:
        json.dump(doc, f)
    checks.clear()
    assert _rows(store) == FIRST and checks == ["rollouts"]


def test_a_forged_summary_serves_only_what_the_manifests_list(store, checks):
    """A summary is one boolean under a digest: forged to match, it can at most spare the
    checks of the files the manifests list now; a path outside the store stays out."""
    _rows(store)
    path, doc = _doc(store)
    for entry in doc["entries"].values():
        for art in (entry[1].get("json") or {}).get("artifacts") or []:
            art["path"] = "../../../etc/passwd.parquet"
    doc["summaries"] = {name: [digest, True] for name, (digest, _) in doc["summaries"].items()}
    with open(path, "w") as f:
        json.dump(doc, f)
    with Catalog(store, for_query=COUNT) as cat:
        assert cat.sql(COUNT).num_rows == 0
        assert any("leaves the store" in p.message for p in cat.problems)


def test_rollouts_bind_their_files_once_without_hive_partitioning(store):
    with Catalog(store, for_query=COUNT) as cat:
        con = cat._raw_cursor()
        [(sql,)] = con.execute("SELECT sql FROM duckdb_views() WHERE view_name = "
                               "'rollouts'").fetchall()
        assert "read_parquet(" in sql and "hive_partitioning = false" in sql
        assert "iter" not in {d[0] for d in con.execute("SELECT * FROM rollouts").description}


def test_names_kept_to_spare_pyarrow_agree_with_their_homes():
    assert {lineage.INPUTS.name, lineage.ROUNDS.name} <= set(connection.DATA_TABLES)
    fields = tuple(f.name for f in dataclasses.fields(ArtifactRef))
    assert fields == ARTIFACT_FIELDS


def test_the_table_format_renders_without_arrow_and_keeps_the_row_cap(store, capsys):
    assert main(["sql", COUNT, "--store", store.url]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[4:6] == ["│ r1      │     6 │", "│ r2      │     6 │"]
    assert main(["sql", "SELECT * FROM rollouts", "--store", store.url, "--max-rows", "11"]) == 2
    assert "returns more than 11 rows" in capsys.readouterr().err
    with Catalog(store, limits=SqlLimits(max_rows=11)) as cat, \
            cat.stream("SELECT * FROM range(11)", materialize=True) as rows:
        assert rows.relation.shape == (11, 1) and list(rows) == []
    with Catalog(store, limits=SqlLimits(max_rows=11)) as cat, pytest.raises(QueryLimit), \
            cat.stream("SELECT * FROM range(12)", materialize=True):
        pass
