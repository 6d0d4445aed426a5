"""One bad file in a store never breaks SQL for the rest: it is named, its run is marked
(`runs.problem`), and every other row is served."""

from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from alignflow.artifacts.commit import commit
from alignflow.artifacts.parquet_io import write_table
from alignflow.catalog.catalog import Catalog
from alignflow.cli import main
from tests.fast.test_catalog_data import T0, populate

METRIC = {"table": "metrics", "rows": 1, "schema": "metrics", "schema_version": "1.0",
          "bytes": 18}


def _problems(cat: Catalog) -> dict[str, str]:
    return {p.path: p.message for p in cat.problems}


def _marked(cat: Catalog) -> dict[str, str | None]:
    return {r["run_id"]: r["problem"] for r in
            cat.sql("SELECT run_id, problem FROM runs ORDER BY run_id").to_pylist()}


@pytest.mark.parametrize("blob", [b"{not json", b"[1, 2]", b"\xff\xfe"])
def test_corrupt_run_json(fast_store, blob):
    populate(fast_store)
    fast_store.write_bytes("runs/r2/run.json", blob)
    with Catalog(fast_store) as cat:
        message = _problems(cat)["runs/r2/run.json"]
        assert message.startswith(f"{fast_store.url}/runs/r2/run.json ") and "\n" not in message
        assert _marked(cat) == {"r1": None, "r2": message}
        assert cat.sql("SELECT count(*) AS n FROM rollouts").to_pylist() == [{"n": 12}]
        assert cat.sql("SELECT status FROM runs WHERE run_id = 'r1'").to_pylist() == [
            {"status": "SUCCESSFUL"}]


@pytest.mark.parametrize(("blob", "says"), [
    (b'{"format": 1, "run_id": "r1"', "is not valid JSON"),
    (json.dumps({"format": 1}).encode(), "manifest lacks field"),
])
def test_corrupt_manifest(fast_store, blob, says):
    populate(fast_store)
    fast_store.write_bytes("runs/r1/tasks/iter-0001/learn.json", blob)
    with Catalog(fast_store) as cat:
        message = _problems(cat)["runs/r1/tasks/iter-0001/learn.json"]
        assert f"{fast_store.url}/runs/r1/tasks/iter-0001/learn.json" in message
        assert says in message
        assert _marked(cat)["r1"] == message and _marked(cat)["r2"] is None
        tasks = cat.sql("SELECT run_id, count(*) AS n FROM tasks GROUP BY 1 ORDER BY 1")
        assert tasks.to_pylist() == [{"run_id": "r1", "n": 3}, {"run_id": "r2", "n": 4}]
        metrics = cat.sql("SELECT run_id, count(*) AS n FROM metrics GROUP BY 1 ORDER BY 1")
        assert metrics.to_pylist() == [{"run_id": "r1", "n": 2}, {"run_id": "r2", "n": 4}]


def test_manifest_with_bad_values(local_store):
    populate(local_store)
    commit(local_store, "r3", "a", {"attempts": 1})
    rel = "runs/r3/tasks/a.json"
    manifest = json.loads(local_store.read_bytes(rel))
    local_store.write_bytes(rel, json.dumps(manifest | {"attempts": "many"}).encode())
    commit(local_store, "r3", "b", {})
    with Catalog(local_store) as cat:
        assert "invalid literal for int()" in _problems(cat)[rel]
        assert cat.sql("SELECT task_key FROM tasks WHERE run_id = 'r3'").to_pylist() == [
            {"task_key": "b"}]
        assert _marked(cat)["r3"].startswith(f"{local_store.url}/{rel}: ")


def test_listed_paths_that_leave_the_store(local_store, tmp_path):
    """A manifest (or a link in the store) pointing outside it is never readable by SQL."""
    populate(local_store)
    secret = tmp_path / "secret.parquet"
    pq.write_table(pq.read_table(local_store.path(local_store.list("runs/r1/metrics",
                                                                    "*.parquet")[0])), secret)
    (tmp_path / "store" / "runs" / "r1" / "metrics" / "link.parquet").symlink_to(secret)
    commit(local_store, "r1", "evil", {"artifacts": [
        METRIC | {"path": "../secret.parquet"}, METRIC | {"path": "runs/r1/metrics/link.parquet"}]})
    with Catalog(local_store) as cat:
        problems = _problems(cat)
        assert "leaves the store root" in problems["runs/r1/tasks/evil.json"]
        assert problems["runs/r1/metrics/link.parquet"] == (
            f"{local_store.url}/runs/r1/metrics/link.parquet is a symbolic link; a store holds "
            "only regular files and folders, and alignflow never follows a link in it; left out")
        assert cat.sql("SELECT count(*) AS n FROM metrics").to_pylist() == [{"n": 8}]
        for path in (str(secret), local_store.path("runs/r1/metrics/link.parquet")):
            with pytest.raises(Exception, match="outside the store"):
                cat.sql(f"SELECT * FROM read_parquet('{path}')")


def _commit_metrics(store, run_id: str, key: str, compression: str = "snappy") -> str:
    ref = write_table(store, "metrics", {"task_key": [key], "step": [5], "key": ["loss"],
                                         "value": [9.0], "ts": [T0]}, run_id=run_id, task=key)
    commit(store, run_id, key, {"artifacts": [ref]})
    return ref.path


def test_corrupt_parquet_footer(fast_store):
    populate(fast_store)
    bad = _commit_metrics(fast_store, "r2", "extra")
    fast_store.write_bytes(bad, b"PAR1 this is not parquet")
    with Catalog(fast_store) as cat:
        message = _problems(cat)[bad]
        assert message.startswith(f"corrupt or unreadable Parquet file {fast_store.url}/{bad}: ")
        assert _marked(cat)["r2"] == message and _marked(cat)["r1"] is None
        assert cat.sql("SELECT count(*) AS n FROM metrics").to_pylist() == [{"n": 8}]
        assert cat.sql("SELECT count(*) AS n FROM tasks").to_pylist() == [{"n": 9}]


def test_corrupt_parquet_data_found_by_a_query(local_store):
    """A valid footer over a corrupt data page fails only when read: that query is answered
    from the other files, and the file is named from then on."""
    populate(local_store)
    bad = local_store.list("runs/r2/rollouts", "*.parquet")[0]
    column = pq.ParquetFile(local_store.path(bad)).metadata.row_group(0).column(0)
    data = bytearray(local_store.read_bytes(bad))
    start = (column.dictionary_page_offset or column.data_page_offset) + 20
    data[start:start + 40] = b"\xff" * 40
    local_store.write_bytes(bad, bytes(data))
    with Catalog(local_store) as cat:
        assert cat.problems == []
        got = cat.sql("SELECT run_id, count(*) AS n FROM rollouts GROUP BY 1 ORDER BY 1")
        assert got.to_pylist() == [{"run_id": "r1", "n": 6}, {"run_id": "r2", "n": 3}]
        assert _problems(cat)[bad].startswith(
            f"corrupt or unreadable Parquet file {local_store.url}/{bad}: ")
        assert _marked(cat)["r2"] == _problems(cat)[bad]


def test_missing_committed_file(fast_store):
    populate(fast_store)
    gone = fast_store.list("runs/r1/metrics", "*.parquet")[0]
    fast_store.delete(gone)
    with Catalog(fast_store) as cat:
        assert _problems(cat)[gone] == (f"committed Parquet file {fast_store.url}/{gone} is "
                                        "missing; left out")
        assert cat.sql("SELECT count(*) AS n FROM metrics").to_pylist() == [{"n": 6}]


def test_broken_step_table_leaves_the_rollouts_served(local_store):
    populate(local_store)
    bad = "runs/r1/rollout_scores/iter=0/score-bad.parquet"
    local_store.write_bytes(bad, b"not parquet")
    commit(local_store, "r1", "iter-0000/score", {"artifacts": [{
        "table": "rollout_scores", "path": bad, "rows": 1, "schema": "rollout_scores",
        "schema_version": "1.0", "bytes": 11}]})
    with Catalog(local_store) as cat:
        assert cat.sql("SELECT count(*) AS n FROM rollouts").to_pylist() == [{"n": 12}]
        assert "score-bad.parquet" in _marked(cat)["r1"]


def test_cli_names_bad_files_and_serves_the_rest(capsys, local_store):
    populate(local_store)
    local_store.write_bytes("runs/r2/tasks/iter-0000/generate.json", b"{")
    code = main(["sql", "SELECT run_id, problem IS NOT NULL AS bad FROM runs ORDER BY 1",
                 "--store", local_store.url, "--format", "csv"])
    out, err = capsys.readouterr()
    assert (code, out) == (0, '"run_id","bad"\n"r1",false\n"r2",true\n')
    assert err == (f"warning: {local_store.url}/runs/r2/tasks/iter-0000/generate.json is not "
                   "valid JSON (Expecting property name enclosed in double quotes: line 1 "
                   "column 2 (char 1)); expected a run record or manifest\n")


@pytest.mark.parametrize(("table", "path", "says"), [
    ("_af_runs", "runs/r1/metrics/x.parquet", "table name '_af_runs': expected"),
    ("tasks", "runs/r1/metrics/x.parquet", "table name 'tasks': expected"),
    ("Bad-Name", "runs/r1/metrics/x.parquet", "table name 'Bad-Name': expected"),
])
def test_manifest_table_names_are_checked(local_store, table, path, says):
    populate(local_store)
    commit(local_store, "r1", "evil", {"artifacts": [METRIC | {"table": table, "path": path}]})
    with Catalog(local_store) as cat:
        assert says in _problems(cat)["runs/r1/tasks/evil.json"]
        assert cat.sql("SELECT count(*) AS n FROM tasks").to_pylist() == [{"n": 9}]
        assert cat.sql("SELECT count(*) AS n FROM _af_runs").to_pylist() == [{"n": 2}]


@pytest.mark.parametrize("path", ["runs/r1", "runs/r1/rollouts/**/*.parquet",
                                  "runs/r1/metrics/x.csv"])
def test_listed_paths_must_be_one_parquet_file(local_store, path):
    """A folder or a glob would let DuckDB read files no manifest lists (orphans)."""
    populate(local_store)
    commit(local_store, "r1", "odd", {"artifacts": [METRIC | {"table": "extras", "path": path}]})
    with Catalog(local_store) as cat:
        assert "expected one .parquet file, no folder or glob" in \
            _problems(cat)["runs/r1/tasks/odd.json"]
        assert cat.sql("SELECT count(*) AS n FROM rollouts").to_pylist() == [{"n": 12}]
        assert "extras" not in cat.tables()
