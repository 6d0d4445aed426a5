"""Replay, fail-fix-resume, rerun-from, cache and code-changed marks (inline executor)."""

from __future__ import annotations

import textwrap

import pytest

from alignflow.artifacts.store import Store
from alignflow.errors import FlowError, TaskFailed
from alignflow.flows.control import api
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


def run(flow, cfg, store, run_id, **kw):
    return api.run(flow, cfg, store=store, run_id=run_id, executor="inline", **kw)


def test_run_commits_one_manifest_per_task_with_documented_fields(store, folder):
    out = run(F.steps, {"dir": folder, "n": 3}, store, "r")
    assert out == [F.StepOut(0, 0.0), F.StepOut(1, 1.5), F.StepOut(2, 3.0)]
    journal = runs.read_manifests(store, "r")
    assert list(journal) == ["step-0", "step-1", "step-2"]
    m = journal["step-1"]
    assert (m["status"], m["attempts"], m["seq"], m["seed"]) == ("SUCCESSFUL", 1, 2, 4074864910)
    assert m["output"] == {"__type__": "tests.flows_for_tests:StepOut",
                           "fields": {"step": 1, "value": 1.5}}
    assert api.get_status("r", store=store) == "SUCCESSFUL"
    assert api.get_output("r", store=store) == out
    assert api.get_output("r", "step-2", store=store) == F.StepOut(2, 3.0)


def test_resume_after_a_crash_runs_only_uncommitted_tasks(store, folder):
    run(F.steps, {"dir": folder, "n": 4}, store, "r")
    for key in ("step-2", "step-3"):  # as if the driver died before these commits
        store.delete(runs.manifest_path("r", key))
    runs.update_run(store, "r", status=runs.RUNNING, output=None)
    assert api.get_status("r", store=store) == runs.RESUMABLE  # RUNNING, but no live lease
    assert api.resume("r", store=store) == [F.StepOut(i, i * 1.5) for i in range(4)]
    assert [F.count(folder, f"step-{i}") for i in range(4)] == [1, 1, 2, 2]
    assert api.get_metadata("r", store=store)["replayed"] == 2


def test_fail_fix_resume_does_not_rerun_earlier_iterations(store, folder, tmp_path):
    (tmp_path / "counts" / "fail-3").write_text("")
    with pytest.raises(TaskFailed, match="task 'step-3' failed: ValueError: planned failure"):
        run(F.steps, {"dir": folder, "n": 5}, store, "r")
    meta = api.get_metadata("r", store=store)
    assert (meta["status"], meta["error_task"]) == ("FAILED", "step-3")
    assert meta["error"] == "task 'step-3' failed: ValueError: planned failure at step 3"
    (tmp_path / "counts" / "fail-3").unlink()  # the fix
    assert len(api.resume("r", store=store)) == 5
    assert [F.count(folder, f"step-{i}") for i in range(5)] == [1, 1, 1, 2, 1]


FLOW_FILE = '''
from alignflow.flows.engine import flow, task
from tests.flows_for_tests import bump

@task
def work(folder, i):
    bump(folder, f"work-{i}")
    if i == 2:
        raise RuntimeError("bug in work")  # BUG
    return i

@flow
def job(cfg):
    return [work(cfg["dir"], i) for i in range(4)]
'''


def test_resume_runs_the_current_code_on_disk_and_marks_code_changes(store, folder, tmp_path):
    path = tmp_path / "myflow.py"
    path.write_text(textwrap.dedent(FLOW_FILE))
    with pytest.raises(TaskFailed, match="bug in work"):
        api.run(f"{path}:job", {"dir": folder}, store=store, run_id="r", executor="inline")
    from alignflow.flows.cli.views import task_rows

    assert not any(r["code_changed"] for r in task_rows(store, "r"))
    path.write_text(FLOW_FILE.replace('raise RuntimeError("bug in work")  # BUG', "i = i"))
    before = {r["key"]: r["code_changed"] for r in task_rows(store, "r")}  # status, pre-resume
    assert before == {"work-0": True, "work-1": True, "work-2": False}  # work-2: the FAILED row
    assert api.resume("r", store=store, flow=f"{path}:job") == [0, 1, 2, 3]
    assert [F.count(folder, f"work-{i}") for i in range(4)] == [1, 1, 2, 1]
    marks = {r["key"]: r["code_changed"] for r in task_rows(store, "r")}
    assert marks == {"work-0": True, "work-1": True, "work-2": False, "work-3": False}


def test_rerun_from_discards_that_task_and_every_later_commit(store, folder):
    run(F.steps, {"dir": folder, "n": 4}, store, "r")
    with pytest.raises(FlowError, match="already SUCCESSFUL"):
        api.resume("r", store=store)
    api.resume("r", store=store, rerun_from="step-2")
    assert [F.count(folder, f"step-{i}") for i in range(4)] == [1, 1, 2, 2]
    seqs = {k: m["seq"] for k, m in runs.read_manifests(store, "r").items()}
    assert seqs == {"step-0": 1, "step-1": 2, "step-2": 3, "step-3": 4}
    with pytest.raises(FlowError, match="no committed task with that key"):
        api.resume("r", store=store, rerun_from="step-9")


def test_cache_hit_across_two_runs(store, folder):
    assert run(F.cached, {"dir": folder, "x": 4}, store, "a") == 40
    assert run(F.cached, {"dir": folder, "x": 4}, store, "b") == 40
    assert F.count(folder, "expensive") == 1
    m = runs.read_manifests(store, "b")["expensive-0"]
    assert m["cached_from"] == "runs/a/tasks/expensive-0.json"
    assert run(F.cached, {"dir": folder, "x": 5}, store, "c") == 50  # other inputs: a miss
    assert F.count(folder, "expensive") == 2


def test_duplicate_explicit_keys_are_refused(store, folder):
    from alignflow.flows.engine import flow

    @flow
    def twice(cfg):
        F.mark.options(key="same")(folder, "a")
        F.mark.options(key="same")(folder, "b")

    with pytest.raises(FlowError, match="task key 'same' is used twice"):
        run(twice, None, store, "r")


def test_tasks_outside_a_flow_are_plain_calls(folder):
    assert F.step(folder, 2) == F.StepOut(2, 3.0)
    assert F.step.submit(folder, 1).result() == F.StepOut(1, 1.5)
