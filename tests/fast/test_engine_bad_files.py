"""A corrupt run.json, manifest or journal names itself and leaves the rest of the store
usable; `delete` refuses a live run and removes a dead one completely or not at all."""

from __future__ import annotations

import pytest

from alignflow.errors import FlowError, LeaseHeld, RunNotFound, SchemaError
from alignflow.flows.cli import views
from alignflow.flows.control import api, removal
from alignflow.flows.journal import runs
from alignflow.flows.journal.lease import Lease
from tests import flows_for_tests as F


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "counts"
    path.mkdir()
    return str(path)


def _runs(store, folder, *ids):
    for run_id in ids:
        api.run(F.steps, {"dir": folder, "n": 2}, store=store, run_id=run_id, executor="inline")


def test_read_json_names_the_file(fast_store):
    fast_store.write_bytes("x/y.json", b"{not json")
    with pytest.raises(SchemaError, match=r"/x/y\.json is not valid JSON \(Expecting"):
        fast_store.read_json("x/y.json")


@pytest.mark.parametrize("content", [b"{broken", b"[1, 2]", b"\xff\xfe"])
def test_a_corrupt_run_json_is_named_and_the_rest_is_listed(fast_store, folder, capsys,
                                                            content):
    _runs(fast_store, folder, "a", "b")
    fast_store.write_bytes(runs.run_json("a"), content)
    problems: list[runs.Problem] = []
    listed = {m["run_id"]: m for m in api.list_runs(fast_store, problems)}
    assert listed["a"]["status"] == runs.UNREADABLE and listed["b"]["status"] == "SUCCESSFUL"
    assert [p.path for p in problems] == ["runs/a/run.json"]
    assert "runs/a/run.json" in listed["a"]["problem"]
    assert views.print_runs(fast_store) == 0
    out, err = capsys.readouterr()
    assert "UNREADABLE" in out and "SUCCESSFUL" in out
    assert err.startswith("warning: ") and "runs/a/run.json" in err
    with pytest.raises(SchemaError, match="runs/a/run.json"):
        api.get_status("a", store=fast_store)
    assert api.resume_all(fast_store) == {}  # nothing resumable, nothing broken


def test_a_corrupt_manifest_is_named_by_status_and_by_resume(fast_store, folder, capsys):
    _runs(fast_store, folder, "a", "b")
    fast_store.write_bytes(runs.manifest_path("a", "step-0"), b'{"task_key": ')
    fast_store.delete("runs/a/journal.json")
    runs.update_run(fast_store, "a", status=runs.FAILED)
    assert views.print_status(fast_store, "a") == 0
    out, err = capsys.readouterr()
    assert "step-1" in out and "step-0" not in out
    assert "warning: " in err and "runs/a/tasks/step-0.json is not valid JSON" in err
    with pytest.raises(SchemaError, match=r"runs/a/tasks/step-0\.json is not valid JSON"):
        api.resume("a", store=fast_store)
    assert views.print_status(fast_store, "b") == 0  # the other run is untouched


def test_a_corrupt_journal_snapshot_is_ignored(fast_store, folder):
    _runs(fast_store, folder, "a")
    fast_store.write_bytes("runs/a/journal.json", b'{"entries": {"x": 1}}')
    assert list(runs.read_manifests(fast_store, "a")) == ["step-0", "step-1"]


def test_delete_refuses_a_live_run(fast_store, folder):
    _runs(fast_store, folder, "a")
    held = Lease(fast_store, "a", ttl=30).acquire()
    try:
        with pytest.raises(LeaseHeld, match=r"cannot delete run 'a': it is live \(driver .*\); "
                                            r"cancel it \(`alignflow cancel a`\)"):
            api.delete("a", store=fast_store)
        assert api.get_status("a", store=fast_store) == "SUCCESSFUL"
    finally:
        held.release()
    api.delete("a", store=fast_store)
    assert fast_store.list("runs") == []
    with pytest.raises(RunNotFound):
        api.delete("a", store=fast_store)


def test_an_interrupted_local_delete_leaves_no_visible_run(local_store, folder, monkeypatch):
    _runs(local_store, folder, "a", "b")

    def crash(_store):
        raise KeyboardInterrupt

    monkeypatch.setattr(removal, "empty_trash", crash)
    with pytest.raises(KeyboardInterrupt):
        api.delete("a", store=local_store)
    assert [m["run_id"] for m in api.list_runs(local_store)] == ["b"]
    assert local_store.list("trash")  # what is left is out of every reader's way
    monkeypatch.undo()
    api.delete("b", store=local_store)  # any later delete empties the trash
    assert local_store.list("trash") == [] and local_store.list("runs") == []


def test_an_interrupted_remote_delete_is_finished_by_deleting_again(memory_store, folder,
                                                                    monkeypatch, capsys):
    _runs(memory_store, folder, "a", "b")

    def crash(_paths, *a, **k):
        raise ConnectionError("store went away")

    monkeypatch.setattr(memory_store.fs, "rm", crash)
    with pytest.raises(ConnectionError):
        api.delete("a", store=memory_store)
    monkeypatch.undo()
    assert [m["run_id"] for m in api.list_runs(memory_store)] == ["b"]
    views.print_runs(memory_store)
    assert "run 'a' is being deleted; finish with `alignflow delete a`" in capsys.readouterr().err
    with pytest.raises(FlowError, match="being deleted"):
        api.resume("a", store=memory_store)
    api.delete("a", store=memory_store)
    assert not [p for p in memory_store.list("runs") if p.startswith("runs/a/")]
