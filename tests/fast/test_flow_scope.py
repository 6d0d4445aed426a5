"""`alignflow.scope`: two subflows in one run keep their own task keys and worker groups,
a resume replays the finished one and restores each group from its own checkpoint, and a
flow run outside any scope keys its tasks as before (inline executor)."""

from __future__ import annotations

import pytest

import alignflow
from alignflow.errors import FlowError
from alignflow.flows.control import api
from alignflow.flows.engine import flow, scope, scope_prefix
from alignflow.flows.journal import runs
from tests import flows_for_tests as F
from tests.fast import test_engine_control

store = test_engine_control.store  # the same fixtures: a fresh store, a counts folder
folder = test_engine_control.folder


@flow
def two_counts(cfg: dict) -> dict:
    """The same subflow twice, each in its own scope (as SFT then GRPO in one pipeline)."""
    with alignflow.scope("first"):
        first = F.counting(cfg)
    with alignflow.scope("second"):
        second = F.counting(cfg)
    return {"first": first, "second": second}


@flow
def two_counts_unscoped(cfg: dict) -> list:
    return F.counting(cfg) + F.counting(cfg)


@flow
def two_parallel_unscoped(cfg: dict) -> list:
    return F.parallel(cfg) + F.parallel(cfg)


@flow
def nested(cfg: dict) -> list:
    with scope("outer"), scope("inner") as prefix:
        assert prefix == "outer/inner/" == scope_prefix()
        return F.steps(cfg)


@flow
def scoped_parallel(cfg: dict) -> list:
    with scope("s"):
        return F.parallel(cfg)


def _run(flow_, cfg, store, run_id):
    return api.run(flow_, cfg, store=store, run_id=run_id, executor="inline")


def test_without_scopes_the_second_subflow_clashes(store, folder):
    with pytest.raises(FlowError, match="task key 'par/0' is used twice"):
        _run(two_parallel_unscoped, {"dir": folder, "n": 2}, store, "r")
    out = _run(two_counts_unscoped, {"dir": folder, "xs": [1, 2]}, store, "shared")
    assert [o["total"] for o in out] == [1, 3, 4, 6]  # one "counter" group for both


def test_each_scope_has_its_own_keys_and_worker_group(store, folder):
    out = _run(two_counts, {"dir": folder, "xs": [1, 2]}, store, "r")
    # a shared "counter" group would give the second subflow totals 4 and 6
    assert [o["total"] for o in out["first"]] == [1, 3]
    assert [o["total"] for o in out["second"]] == [1, 3]
    journal = runs.read_manifests(store, "r")
    assert sorted(journal) == ["first/add-0", "first/add-1", "second/add-0", "second/add-1"]
    assert {journal[k]["worker"] for k in journal} == {"first/counter", "second/counter"}
    assert all(journal[k]["worker"] == k.split("/")[0] + "/counter" for k in journal)


def test_resume_replays_the_finished_scope_and_restores_each_group_its_own(store, folder):
    cfg = {"dir": folder, "xs": [1, 2]}
    _run(two_counts, cfg, store, "r")
    store.delete(runs.manifest_path("r", "second/add-1"))  # the driver died before this commit
    runs.update_run(store, "r", status=runs.RUNNING, output=None)
    out = api.resume("r", store=store)
    assert F.count(folder, "add") == 5  # 4 tasks, and only second/add-1 again
    assert out["second"][1]["total"] == 3  # from second's checkpoint (1), not first's (3)
    assert out["second"][1]["restored_from"] == out["second"][0]["checkpoint"]
    assert "second/add-0" in out["second"][0]["checkpoint"]
    assert api.get_metadata("r", store=store)["replayed"] == 3


def test_outside_a_scope_keys_are_unchanged_and_scopes_nest(store, folder):
    _run(F.steps, {"dir": folder, "n": 2}, store, "plain")
    assert list(runs.read_manifests(store, "plain")) == ["step-0", "step-1"]
    _run(nested, {"dir": folder, "n": 2}, store, "nested")
    assert list(runs.read_manifests(store, "nested")) == ["outer/inner/step-0",
                                                          "outer/inner/step-1"]
    assert scope_prefix() == ""  # the scopes were left


def test_explicit_keys_are_prefixed_and_bad_names_refused(store, folder):
    _run(scoped_parallel, {"dir": folder, "n": 2}, store, "p")
    assert sorted(runs.read_manifests(store, "p")) == ["s/par/0", "s/par/1"]
    with scope("s"):
        assert scope_prefix() == "s/"
        assert F.step(folder, 1) == F.StepOut(1, 1.5)  # outside a flow: a plain call
    for bad in ("", "a/b", ".hidden", "x y"):
        with pytest.raises(FlowError, match="scope name"), scope(bad):
            pass
