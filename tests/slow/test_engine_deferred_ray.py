"""Deferred commits on Ray: the worker actor answers `durable` on its side thread while the
next task runs in its main one; a checkpoint lost with its process is written again by the
replaced worker, without re-forming the run (`flows/control/redo.py`)."""

from __future__ import annotations

import io

import pytest

from alignflow.artifacts.store import Store
from alignflow.errors import TaskFailed
from alignflow.flows.cli.progress import Progress
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests.deferred_flows import deferred, lost_write
from tests.flows_for_tests import count

pytestmark = pytest.mark.slow


def test_ray_worker_settles_beside_the_next_task(ray_local, tmp_path):
    store = Store.open(str(tmp_path / "store"))
    assert api.run(deferred, {"fail": False}, store=store, run_id="r") == 1
    journal = runs.read_manifests(store, "r")
    assert journal["save-0"]["seq"] < journal["after-0"]["seq"]
    assert journal["save-0"]["settled"] >= journal["after-0"]["started"]
    with pytest.raises(TaskFailed, match="disk full"):
        api.run(deferred, {"fail": True}, store=store, run_id="f")
    assert "save-0" not in runs.read_manifests(store, "f")


def test_a_checkpoint_lost_with_its_process_is_written_again(ray_local, tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_RAY_POOL", "0")  # the kill runs in a process of its own
    store, folder, out = Store.open(str(tmp_path / "store")), tmp_path / "counts", io.StringIO()
    folder.mkdir()
    got = api.run(lost_write, {"dir": str(folder)}, store=store, run_id="k", executor="ray",
                  progress=Progress(stream=out, live=False))
    assert got == [1, 3, 6]  # the new process restored train-0's total and trained train-1 again
    assert count(folder, "train-2") == 2 and count(folder, "train-1") == 1
    assert [count(folder, f"use-{n}") for n in (1, 3, 6)] == [1, 1, 1]  # nothing re-formed
    assert "the worker is replaced and runs" in out.getvalue(), out.getvalue()
    journal = runs.read_manifests(store, "k")
    assert journal["train-1"]["attempts"] == 2
    assert store.read_json(journal["train-1"]["checkpoint"]) == {"total": 3}
    assert runs.read_run(store, "k")["recoveries"] == {"worker group 't'": 1}, out.getvalue()
