"""One hostile file in a local store takes no command down, and no resume writes through a
link (issue 20 §2, §4): `ls`, `status`, `tick` and `resume --all` name the file in one line,
mark its run and serve the others, without hanging or reading without end; a symlinked
`final/` or `logs/` is refused, and what it points to stays untouched."""

from __future__ import annotations

import os

import pytest

from alignflow.cli import main
from alignflow.errors import StoreFileRefused
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests import flows_for_tests as F

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def store(two_finished_runs):
    """Finished runs `a` and `b` of `steps`."""
    return two_finished_runs


@pytest.fixture
def outside(tmp_path):
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "config.json").write_text('{"mine": true}')
    return folder


def _zero(store) -> str:
    os.unlink(store.path("runs/a/run.json"))
    os.symlink("/dev/zero", store.path("runs/a/run.json"))
    return "runs/a/run.json is a symbolic link"


def _fifo(store) -> str:
    os.mkfifo(store.path("runs/a/tasks/step-9.json"))
    return "runs/a/tasks/step-9.json is a FIFO"


def _deep(store) -> str:
    store.write_bytes("runs/a/run.json", b"[" * 100_000)
    return "runs/a/run.json nests JSON more than 128 levels deep"


def _huge(store) -> str:
    os.truncate(store.path("runs/a/run.json"), 5 * 2**20)
    return "runs/a/run.json is 5 MiB; a file of this kind is at most 4 MiB (not read)"


def _linked_run(store) -> str:
    os.rename(store.path("runs/a"), store.path("elsewhere"))
    os.symlink(store.path("elsewhere"), store.path("runs/a"))
    return "runs/a is a symbolic link"


HOSTILE = {"zero": _zero, "fifo": _fifo, "deep": _deep, "huge": _huge, "linked": _linked_run}


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_ls_tick_and_resume_all_serve_the_other_runs(store, capsys, hostile, bounded_memory):
    says = HOSTILE[hostile](store)
    listed = {m["run_id"]: m for m in api.list_runs(store, [])}
    assert listed["a"]["status"] == runs.UNREADABLE and says in listed["a"]["problem"]
    assert listed["b"]["status"] == "SUCCESSFUL"
    for argv in (["ls"], ["tick"], ["resume", "--all"]):
        code, out, err = _cli(capsys, *argv, "--store", store.url)
        assert code == 0, err
        warnings = [line for line in err.splitlines() if line.startswith("warning: ")]
        assert len(warnings) == 1 and says in warnings[0], err
        assert warnings[0].endswith("(run a is marked)") and "Traceback" not in err
    code, out, _ = _cli(capsys, "ls", "--store", store.url)
    assert "b  " in out and "SUCCESSFUL" in out and "UNREADABLE" in out


def test_status_names_a_fifo_manifest_and_shows_the_rest(store, capsys):
    _fifo(store)
    code, out, err = _cli(capsys, "status", "a", "--store", store.url)
    assert code == 0 and "step-0" in out and "step-1" in out
    assert err.count("\n") == 1 and "runs/a/tasks/step-9.json is a FIFO" in err
    assert _cli(capsys, "status", "b", "--store", store.url)[0] == 0


def test_status_and_resume_name_a_linked_tasks_folder(store, capsys):
    os.rename(store.path("runs/a/tasks"), store.path("elsewhere"))
    os.symlink(store.path("elsewhere"), store.path("runs/a/tasks"))
    store.delete("runs/a/journal.json")
    code, out, err = _cli(capsys, "status", "a", "--store", store.url)
    assert code == 0 and "step-0" not in out
    assert "runs/a/tasks is a symbolic link" in err and err.count("\n") == 1
    with pytest.raises(StoreFileRefused, match=r"runs/a/tasks is a symbolic link"):
        runs.read_manifests(store, "a")


def test_logs_names_a_linked_log_and_prints_the_others(store, capsys, outside):
    store.write_bytes("runs/a/logs/step-0.log", b"zero says hi\n")
    os.symlink(outside / "config.json", store.path("runs/a/logs/step-1.log"))
    code, out, err = _cli(capsys, "logs", "a", "--store", store.url)
    assert code == 0 and "zero says hi" in out and '"mine"' not in out
    assert "runs/a/logs/step-1.log is a symbolic link" in err


def _failed(local_store, tmp_path, flow=F.steps) -> None:
    (tmp_path / "counts").mkdir(exist_ok=True)
    (tmp_path / "counts" / "fail-1").write_text("")
    with pytest.raises(Exception, match="planned failure"):
        api.run(flow, {"dir": str(tmp_path / "counts"), "n": 2}, store=local_store,
                run_id="a", executor="inline")


def test_resume_does_not_write_its_log_through_a_linked_logs_folder(local_store, tmp_path,
                                                                    outside, capsys):
    _failed(local_store, tmp_path)
    assert local_store.exists("runs/a/logs/step-1.log")
    local_store.delete("runs/a/logs", recursive=True)
    (outside / "step-1.log").write_text("my own log")
    os.symlink(outside, local_store.path("runs/a/logs"))
    with pytest.raises(Exception, match="planned failure"):
        api.resume("a", store=local_store)
    assert (outside / "step-1.log").read_text() == "my own log"
    assert sorted(os.listdir(outside)) == ["config.json", "step-1.log"]
    err = capsys.readouterr().err
    assert "warning: task log not written: " in err and "runs/a/logs is a symbolic link" in err


def test_resume_does_not_export_through_a_linked_final_folder(local_store, tmp_path, outside):
    _failed(local_store, tmp_path, F.exporting)
    os.symlink(outside, local_store.path("runs/a/final"))
    (tmp_path / "counts" / "fail-1").unlink()
    with pytest.raises(Exception, match=r"runs/a/final is a symbolic link; a store holds only "
                                        r"regular files and folders.*\(writing refused\)"):
        api.resume("a", store=local_store)
    assert (outside / "config.json").read_text() == '{"mine": true}'
    assert sorted(os.listdir(outside)) == ["config.json"]
    os.unlink(local_store.path("runs/a/final"))  # the link gone, the same resume exports
    assert api.resume("a", store=local_store)["path"] == "runs/a/final/actor"
    assert local_store.read_json("runs/a/final/actor/config.json") == {
        "model_type": "written by the export"}


def test_delete_refuses_a_linked_trash_folder(store, outside):
    os.symlink(outside, store.path("trash"))
    with pytest.raises(StoreFileRefused, match=r"/trash is a symbolic link"):
        api.delete("a", store=store)
    assert sorted(os.listdir(outside)) == ["config.json"]
    assert api.get_status("a", store=store) == "SUCCESSFUL"
    os.unlink(store.path("trash"))
    api.delete("a", store=store)
    assert [m["run_id"] for m in api.list_runs(store)] == ["b"]
