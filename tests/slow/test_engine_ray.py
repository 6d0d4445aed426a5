"""The engine on Ray Core: a killed worker process is retried, independent tasks overlap,
worker groups run in one actor and are restored from their newest checkpoint."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests import flows_for_tests as F

pytestmark = pytest.mark.slow


@pytest.fixture
def store(tmp_path):
    return Store.open(str(tmp_path / "store"))


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "counts"
    path.mkdir()
    return str(path)


def test_killed_worker_process_is_retried(ray_local, store, folder, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.05")
    pid_file = Path(folder) / "pid"
    killed = []

    def killer():
        deadline = time.time() + 120
        while not pid_file.exists() and time.time() < deadline:
            time.sleep(0.05)
        pid = int(pid_file.read_text())
        os.kill(pid, signal.SIGKILL)
        killed.append(pid)

    thread = threading.Thread(target=killer)
    thread.start()
    out = api.run(F.killable_worker, {"dir": folder}, store=store, run_id="r", executor="ray")
    thread.join()
    assert out != killed[0]  # the retry ran in a fresh worker process
    m = runs.read_manifests(store, "r")["pid_then_sleep-0"]
    assert (m["attempts"], m["status"], F.count(folder, "pid_then_sleep")) == (2, "SUCCESSFUL", 2)


def test_independent_tasks_run_concurrently(ray_local, store, folder):
    api.run(F.training_pair, {"seconds": 1.0}, store=store, run_id="warm", executor="ray")
    out = api.run(F.training_pair, {"seconds": 5.0}, store=store, run_id="r", executor="ray")
    a, b = (runs.read_manifests(store, "r")[k] for k in ("pair/a", "pair/b"))
    assert a["started"] < b["ended"] and b["started"] < a["ended"]  # the two sleeps overlap
    assert out == [5.0, 5.0]


def test_worker_group_is_one_actor_restored_on_resume(ray_local, store, folder):
    out = api.run(F.counting, {"dir": folder, "xs": [1, 2, 3]}, store=store, run_id="r",
                  executor="ray")
    assert [o["total"] for o in out] == [1, 3, 6]  # state kept between calls: one object
    store.delete(runs.manifest_path("r", "add-2"))
    runs.update_run(store, "r", status=runs.RUNNING)
    out = api.resume("r", store=store)
    assert out[2]["total"] == 6
    assert out[2]["restored_from"] == "runs/r/checkpoints/counter-add-1.json"
    assert F.count(folder, "add") == 4


def test_killed_worker_actor_is_recreated_and_restored(ray_local, store, folder, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.05")
    pid_file = Path(folder) / "pid"

    def killer():
        deadline = time.time() + 120
        while not pid_file.exists() and time.time() < deadline:
            time.sleep(0.05)
        os.kill(int(pid_file.read_text()), signal.SIGKILL)

    thread = threading.Thread(target=killer)
    thread.start()
    out = api.run(F.counting_then_hang, {"dir": folder}, store=store, run_id="r",
                  executor="ray")
    thread.join()
    assert out == {"total": 13, "restored_from": "runs/r/checkpoints/counter-add-1.json"}
    assert runs.read_manifests(store, "r")["add_or_hang-0"]["attempts"] == 2
