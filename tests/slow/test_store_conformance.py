"""One conformance suite over memory://, a local dir and S3 (moto): same behaviour everywhere."""

from __future__ import annotations

import pickle

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from alignflow.artifacts import commit, committed_files, read_table, write_table
from alignflow.errors import CommitConflict, SchemaError

pytestmark = pytest.mark.slow


def _metrics(n: int, step0: int = 0) -> pa.Table:
    return pa.table({"task_key": ["t"] * n, "step": list(range(step0, step0 + n)),
                     "key": ["loss"] * n, "value": [i / 4 for i in range(n)]})


def test_json_roundtrip_and_overwrite(store):
    store.write_json("runs/r/run.json", {"status": "RUNNING"})
    store.write_json("runs/r/run.json", {"status": "SUCCESSFUL", "n": 2})
    assert store.read_json("runs/r/run.json") == {"status": "SUCCESSFUL", "n": 2}
    assert store.exists("runs/r/run.json")
    assert not store.exists("runs/r/nothing.json")


def test_create_json_once(store):
    store.create_json("runs/r/tasks/a/b.json", {"v": 1})
    with pytest.raises(CommitConflict, match="runs/r/tasks/a/b.json"):
        store.create_json("runs/r/tasks/a/b.json", {"v": 2})
    assert store.read_json("runs/r/tasks/a/b.json") == {"v": 1}


def test_list_and_delete(store):
    for rel in ["runs/r/x/1.json", "runs/r/x/2.txt", "runs/r/y/3.json"]:
        store.write_bytes(rel, b"1")
    assert store.list("runs/r") == ["runs/r/x/1.json", "runs/r/x/2.txt", "runs/r/y/3.json"]
    assert store.list("runs/r", "*.json") == ["runs/r/x/1.json", "runs/r/y/3.json"]
    assert store.list("runs/none") == []
    store.delete("runs/r/x/2.txt")
    assert store.list("runs/r/x") == ["runs/r/x/1.json"]


def test_write_commit_read(store):
    ref = write_table(store, "metrics", _metrics(5), run_id="r", task="learn",
                      partition={"iter": 2})
    assert ref.rows == 5 and ref.path.startswith("runs/r/metrics/iter=2/learn-")
    assert ref.bytes == store.size(ref.path)
    assert committed_files(store) == []  # written but not visible before the commit
    commit(store, "r", "iter-0002/learn", {"artifacts": [ref]})
    refs = committed_files(store, "r")
    assert refs == [ref]
    table = read_table(store, refs)
    assert table.column("step").to_pylist() == [0, 1, 2, 3, 4]
    assert table.column("value").to_pylist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert set(table.column("run_id").to_pylist()) == {"r"}
    with pytest.raises(CommitConflict):
        commit(store, "r", "iter-0002/learn", {"artifacts": [ref]})


def test_unknown_major_version_refused(store):
    table = _metrics(2).append_column("run_id", pa.array(["r", "r"]))
    table = table.replace_schema_metadata({"alignflow.schema": "metrics",
                                           "alignflow.schema_version": "2.0"})
    with store.fs.open(store.path("runs/r/metrics/x.parquet"), "wb") as f:
        pq.write_table(table, f)
    with pytest.raises(SchemaError, match=r"runs/r/metrics/x.parquet.*2\.0.*unknown major"):
        read_table(store, ["runs/r/metrics/x.parquet"])


def test_pickle_reopens(store):
    store.write_json("a.json", {"x": 1})
    again = pickle.loads(pickle.dumps(store))
    assert again.url == store.url and again.read_json("a.json") == {"x": 1}
