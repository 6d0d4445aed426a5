"""Store basics that need no S3: URLs, atomic local commit, manifests, scope."""

from __future__ import annotations

import contextlib
import os

import pyarrow as pa
import pytest

from alignflow.artifacts import (
    Store,
    TaskScope,
    commit,
    committed_files,
    current_scope,
    load_manifest,
    read_table,
    use_scope,
)
from alignflow.artifacts.commit import FIELDS, manifest_path, read_manifest
from alignflow.errors import CommitConflict, ConfigError, FlowError, SchemaError


def test_urls(tmp_path, monkeypatch):
    monkeypatch.delenv("ALIGNFLOW_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert Store.open().root == str(tmp_path / "alignflow-store")
    assert Store.open(f"file://{tmp_path}/s").root == f"{tmp_path}/s"
    assert Store.open("memory://abc").root == "/abc"
    monkeypatch.setenv("ALIGNFLOW_STORE", "memory://from-env")
    assert Store.open().url == "memory://from-env"
    with pytest.raises(ConfigError, match="gs://b"):
        Store.open("gs://b")
    with pytest.raises(ConfigError, match="leaves the store root"):
        Store.open("memory://x").path("../etc/passwd")


def test_s3_url_needs_bucket():
    with pytest.raises(ConfigError, match="names no bucket"):
        Store.open("s3://")


def test_local_create_leaves_no_temp_and_conflicts(local_store):
    local_store.create_json("runs/r/tasks/a.json", {"x": 1})
    folder = os.path.dirname(local_store.path("runs/r/tasks/a.json"))
    assert os.listdir(folder) == ["a.json"]
    with pytest.raises(CommitConflict):
        local_store.create_json("runs/r/tasks/a.json", {"x": 2})
    assert os.listdir(folder) == ["a.json"]
    assert local_store.read_json("runs/r/tasks/a.json") == {"x": 1}


def test_commit_defaults_and_validation(fast_store):
    m = commit(fast_store, "r1", "iter-0001/generate", {"seed": 7, "output": {"n": 2}})
    assert sorted(m) == sorted(FIELDS)
    assert (m["task"], m["status"], m["artifacts"], m["seed"]) == ("generate", "SUCCESSFUL", [], 7)
    assert load_manifest(fast_store, "r1", "iter-0001/generate") == m
    assert load_manifest(fast_store, "r1", "iter-0002/generate") is None
    with pytest.raises(ConfigError, match="unknown field"):
        commit(fast_store, "r1", "x", {"colour": "red"})
    with pytest.raises(ConfigError, match="task key"):
        commit(fast_store, "r1", "a/../b", {})


def test_manifest_missing_field_named(fast_store):
    rel = manifest_path("r1", "t")
    bad = {k: None for k in FIELDS if k != "input_hash"} | {"format": 1, "status": "SUCCESSFUL",
                                                           "artifacts": []}
    fast_store.create_json(rel, bad)
    with pytest.raises(SchemaError, match=r"runs/r1/tasks/t.json: manifest lacks field "
                                          r"'input_hash'"):
        read_manifest(fast_store, rel)
    with pytest.raises(SchemaError, match="input_hash"):
        committed_files(fast_store)


def test_scope_writes_and_stages(fast_store):
    with pytest.raises(FlowError, match="outside a task"):
        current_scope()
    scope = TaskScope(fast_store, "r1", "iter-0002/score", seed=5, attempt=1)
    with use_scope(scope):
        ref = current_scope().write("metrics", {"step": [2], "key": ["reward"], "value": [0.5]},
                                    partition={"iter": 2})
    with pytest.raises(FlowError):
        current_scope()
    assert scope.staged == [ref]
    assert ref.path.startswith("runs/r1/metrics/iter=2/iter-0002-score-")
    commit(fast_store, "r1", scope.task_key, {"artifacts": scope.staged})
    row = read_table(fast_store, committed_files(fast_store, "r1")).to_pylist()[0]
    assert row == {"run_id": "r1", "task_key": "iter-0002/score", "step": 2, "key": "reward",
                   "value": 0.5, "ts": None}


def test_exception_mid_stream_leaves_nothing(fast_store):
    from alignflow.artifacts import write_table

    def batches():
        yield pa.record_batch({"task_key": ["t"], "step": [1], "key": ["k"]})
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        write_table(fast_store, "metrics", batches(), run_id="r", task="t")
    assert fast_store.list("runs") == []


def test_a_file_removed_mid_listing_is_left_out_not_the_whole_folder(local_store, monkeypatch):
    """A file deleted between reading a folder and looking at its entries (a lease's old
    generation, a temp) drops out of the listing; the others stay (an empty listing made
    a racing driver take lease generation 1 beside the holder of generation 3)."""
    from alignflow.artifacts import localfs

    for name in ("a.json", "b.json", "c.json"):
        local_store.write_json(f"d/{name}", {})
    real_scandir = os.scandir

    def scandir_then_remove(fd):
        listing = list(real_scandir(fd))
        os.unlink(os.path.join(local_store.root, "d", "a.json"))
        return contextlib.nullcontext(iter(listing))

    monkeypatch.setattr(localfs.os, "scandir", scandir_then_remove)
    assert local_store.list("d") == ["d/b.json", "d/c.json"]
