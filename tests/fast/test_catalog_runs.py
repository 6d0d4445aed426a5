"""The `runs` view reads run.json as the engine writes it (flows/control/api.py `run()`)."""

from __future__ import annotations

import json

import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.flows.control import api
from tests.flows_for_tests import steps


def test_runs_view_of_a_real_run(local_store, tmp_path):
    api.run(steps, {"dir": str(tmp_path), "n": 2}, store=local_store, executor="inline",
            run_id="real", seed=5)
    meta = json.loads(local_store.read_bytes("runs/real/run.json"))
    assert "created" in meta and "started" not in meta and isinstance(meta["code"], dict)
    with Catalog(local_store) as cat:
        row = cat.sql("SELECT flow, status, seed, epoch(started) AS started, epoch(ended) AS "
                      "ended, duration, code_version, code->>'flow_file' AS flow_file, "
                      "problem FROM runs WHERE run_id = 'real'").to_pylist()[0]
    assert row["started"] == pytest.approx(meta["created"], abs=1e-5)  # microseconds
    assert row["ended"] == pytest.approx(meta["ended"], abs=1e-5)
    assert row["duration"] == meta["active"] <= meta["ended"] - meta["created"]  # driven time
    assert row["duration"] > 0
    code = meta["code"]
    expected = code["git_commit"] or f"sha256:{code['flow_sha256']}"
    assert row["code_version"] == expected and len(expected) >= 40
    assert row["flow_file"].endswith("tests/flows_for_tests.py")
    assert (row["flow"], row["status"], row["seed"], row["problem"]) == (
        "steps", "SUCCESSFUL", 5, None)


def test_code_version_without_git(local_store):
    local_store.write_json("runs/x/run.json", {
        "run_id": "x", "created": 100.0, "ended": None, "status": "RUNNING",
        "code": {"git_commit": None, "flow_sha256": "ab" * 32, "flow_file": "/f.py"}})
    with Catalog(local_store) as cat:
        row = cat.sql("SELECT code_version, duration, epoch(started) AS s FROM runs").to_pylist()
    assert row == [{"code_version": "sha256:" + "ab" * 32, "duration": None, "s": 100.0}]
