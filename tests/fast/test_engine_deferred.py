"""Tasks whose background work (a checkpoint being written) outlives their body: the next
task starts at once, commits stay in call order, and a task is committed only once its
background work is done (its refs listed); if that work fails, the task is not committed."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from alignflow.artifacts.scope import current_scope
from alignflow.artifacts.store import Store
from alignflow.errors import TaskFailed
from alignflow.flows.control import api
from alignflow.flows.engine import flow, task
from alignflow.flows.journal import runs
from tests.deferred_flows import deferred


@pytest.fixture
def store(tmp_path):
    return Store.open(str(tmp_path / "store"))


def test_the_next_task_runs_while_the_previous_one_settles(store):
    assert api.run(deferred, {"fail": False}, store=store, run_id="r", executor="inline") == 1
    journal = runs.read_manifests(store, "r")
    first, second = journal["save-0"], journal["after-0"]
    assert first["seq"] < second["seq"]  # committed in call order
    assert first["settled"] >= second["started"]  # settled only after the next task began
    assert [a["table"] for a in first["artifacts"]] == ["metrics"]  # the deferred work's ref
    assert first["queued"] <= first["started"] <= first["ended"]


def test_a_failed_background_write_leaves_the_task_uncommitted(store):
    with pytest.raises(TaskFailed, match="checkpoint was not written .*disk full"):
        api.run(deferred, {"fail": True}, store=store, run_id="r", executor="inline")
    assert set(runs.read_manifests(store, "r")) == set()
    assert runs.read_run(store, "r")["status"] == runs.FAILED


def test_plain_tasks_wait_for_their_background_work(store):
    @task
    def plain() -> int:
        pool = ThreadPoolExecutor(max_workers=1)
        current_scope().defer(pool.submit(lambda: time.sleep(0.05) or []))
        return 1

    @flow
    def one(cfg: dict) -> int:
        return plain()
    assert api.run(one, {}, store=store, run_id="p", executor="inline") == 1
    assert "settled" not in runs.read_manifests(store, "p")["plain-0"]


def test_tasks_view_shows_queue_run_and_settle_times(store):
    from alignflow.catalog.catalog import Catalog

    api.run(deferred, {"fail": False}, store=store, run_id="r", executor="inline")
    with Catalog(store) as cat:
        rows = {r["task_key"]: r for r in cat.sql(
            "SELECT task_key, queue_time, duration, settle_time FROM tasks").to_pylist()}
    assert all(r["queue_time"] >= 0 and r["duration"] >= 0 for r in rows.values())
    assert rows["save-0"]["settle_time"] >= 0 and rows["after-0"]["settle_time"] is None
