"""Deferred commits on Ray: the worker actor answers `durable` on its side thread while the
next task runs in its main one."""

from __future__ import annotations

import pytest

from alignflow.artifacts.store import Store
from alignflow.errors import TaskFailed
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests.deferred_flows import deferred

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
