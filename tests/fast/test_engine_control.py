"""Durable sleep and events, tick, cancel, delete, resume_all, retries, workers (leases:
test_engine_lease.py)."""

from __future__ import annotations

import os
import time

import pytest

from alignflow.artifacts.store import Store
from alignflow.errors import FlowError, RunNotFound, TaskFailed
from alignflow.flows.control import api
from alignflow.flows.control.driver import Driver
from alignflow.flows.engine import TaskError
from alignflow.flows.journal import runs
from tests import flows_for_tests as F


@pytest.fixture
def store(tmp_path):
    return Store.open(str(tmp_path / "store"))


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "counts"
    path.mkdir()
    return str(path)


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.01")


def run(flow, cfg, store, run_id, **kw):
    return api.run(flow, cfg, store=store, run_id=run_id, executor="inline", **kw)


def _crashed(store, folder, run_id="r"):
    """A run whose driver died after step-0: RUNNING, step-1 uncommitted."""
    run(F.steps, {"dir": folder, "n": 2}, store, run_id)
    store.delete(runs.manifest_path(run_id, "step-1"))
    runs.update_run(store, run_id, status=runs.RUNNING)


def test_durable_sleep_survives_a_driver_restart(store, folder):
    assert run(F.sleepy, {"dir": folder, "seconds": 1.0}, store, "r", block=False) is None
    meta = api.get_metadata("r", store=store)
    assert meta["status"] == runs.SLEEPING
    assert meta["wake_at"] == runs.read_manifests(store, "r")["sleep-0"]["output"]["wake"]
    assert api.tick(store) == {}  # not due yet: nothing runs
    time.sleep(0.6)
    t0 = time.time()
    assert api.resume("r", store=store) == ["before", "after"]  # sleeps only what is left
    assert time.time() - t0 < 0.8
    assert (F.count(folder, "before"), F.count(folder, "after")) == (1, 1)


def test_tick_advances_sleeping_runs_when_due(store, folder):
    run(F.sleepy, {"dir": folder, "seconds": 0.3}, store, "r", block=False)
    time.sleep(0.35)
    assert api.tick(store) == {"r": "SUCCESSFUL"}
    assert api.get_output("r", store=store) == ["before", "after"]


def test_wait_for_an_event(store, folder):
    run(F.waiting, {"dir": folder}, store, "r", block=False)
    meta = api.get_metadata("r", store=store)
    assert (meta["status"], meta["waiting_for"]) == (runs.SLEEPING, "approve")
    assert api.tick(store) == {}
    api.send_event("r", "approve", {"ok": True}, store=store)
    assert api.tick(store) == {"r": "SUCCESSFUL"}
    assert api.get_output("r", store=store) == {"payload": {"ok": True}}
    assert (F.count(folder, "before"), F.count(folder, "after")) == (1, 1)


def test_wait_for_times_out_with_none(store, folder):
    assert run(F.waiting, {"dir": folder, "timeout": 0.2}, store, "r") == {"payload": None}


def test_cancel_stops_a_live_driver_at_the_next_task(store, folder, monkeypatch):
    monkeypatch.setattr(Driver, "check_interval", 0.0)
    with pytest.raises(FlowError, match="stopped"):
        run(F.self_canceling, {"dir": folder}, store, "r")
    assert api.get_status("r", store=store) == runs.CANCELED
    assert F.count(folder, "after-cancel") == 0
    with pytest.raises(FlowError, match="CANCELED"):
        api.resume("r", store=store)


def test_delete_removes_the_run(store, folder):
    run(F.steps, {"dir": folder, "n": 1}, store, "r")
    api.delete("r", store=store)
    assert not store.exists("runs/r")
    with pytest.raises(RunNotFound, match="no run 'r'"):
        api.get_status("r", store=store)


def test_resume_all_resumes_every_resumable_run(store, folder):
    _crashed(store, folder, "a")
    _crashed(store, folder, "b")
    run(F.steps, {"dir": folder, "n": 1}, store, "done")
    results = api.resume_all(store)
    assert sorted(results) == ["a", "b"]
    assert [m["status"] for m in api.list_runs(store)] == ["SUCCESSFUL"] * 3
    assert [m["tasks"] for m in api.list_runs(store)] == [2, 2, 1]


def test_transient_errors_are_retried_and_attempts_recorded(store, folder):
    assert run(F.retrying, {"dir": folder, "fail_times": 2, "exc": "timeout"}, store, "r") == 3
    assert runs.read_manifests(store, "r")["flaky-0"]["attempts"] == 3


def test_user_errors_are_not_retried_unless_asked(store, folder):
    with pytest.raises(TaskFailed, match="ValueError: attempt 1 failed"):
        run(F.retrying, {"dir": folder, "fail_times": 1, "exc": "value"}, store, "a")
    assert F.count(folder, "flaky") == 1
    os.remove(os.path.join(folder, "flaky.count"))
    cfg = {"dir": folder, "fail_times": 1, "exc": "value", "retry": True}
    assert run(F.retrying, cfg, store, "b") == 2


def test_retries_give_up_after_max_retries(store, folder):
    cfg = {"dir": folder, "fail_times": 9, "exc": "timeout", "max_retries": 2}
    with pytest.raises(TaskFailed, match="TimeoutError: attempt 3 failed"):
        run(F.retrying, cfg, store, "r")
    assert F.count(folder, "flaky") == 3


def test_catch_exceptions_returns_a_task_error(store, folder):
    cfg = {"dir": folder, "fail_times": 1, "exc": "value", "catch": True}
    out = run(F.retrying, cfg, store, "r")
    assert out == TaskError("flaky-0", "ValueError", "attempt 1 failed", "user")
    assert runs.read_manifests(store, "r")["flaky-0"]["status"] == "FAILED_CAUGHT"
    assert api.get_status("r", store=store) == "SUCCESSFUL"


def test_worker_restored_from_newest_checkpoint_before_first_live_task(store, folder):
    out = run(F.counting, {"dir": folder, "xs": [1, 2, 3]}, store, "r")
    assert [o["total"] for o in out] == [1, 3, 6]
    store.delete(runs.manifest_path("r", "add-2"))
    runs.update_run(store, "r", status=runs.RUNNING)
    out = api.resume("r", store=store)
    assert out[2] == {"total": 6, "restored_from": "runs/r/checkpoints/counter-add-1.json",
                      "checkpoint": "runs/r/checkpoints/counter-add-2.json"}
    assert F.count(folder, "add") == 4
