"""A store damaged after its commits is said so (issue 40 §7): `ls` marks a run whose
committed Parquet files are truncated or deleted, or whose manifest is cut short, from its
listing and manifests alone; `status RUN` names each file, and checks whole checkpoints
against the sizes their meta.json records. The other runs are served as before."""

from __future__ import annotations

import pytest

from alignflow.artifacts.commit import commit
from alignflow.cli import main
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from alignflow.flows.journal.lease import Lease
from tests import flows_for_tests as F

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def store(fast_store):
    """Finished runs `a` and `b` of `blobs`: three metrics Parquet files each."""
    for run_id in ("a", "b"):
        api.run(F.blobs, {"iters": 3, "rows": 50}, store=fast_store, run_id=run_id,
                executor="inline")
    return fast_store


def _parquet(store, run_id: str) -> list[str]:
    return sorted(p for p in store.list(f"runs/{run_id}") if p.endswith(".parquet"))


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main([*argv])
    out, err = capsys.readouterr()
    return code, out, err


def _ls(store, capsys) -> tuple[dict[str, str], list[str]]:
    code, out, err = _cli(capsys, "ls", "--store", store.url)
    assert code == 0 and "Traceback" not in err
    return {line.split()[0]: line for line in out.splitlines()[1:]}, err.splitlines()


def test_a_truncated_parquet_file_is_flagged_by_ls_and_status(store, capsys):
    path = _parquet(store, "a")[0]
    store.write_bytes(path, store.read_bytes(path)[:10])
    rows, err = _ls(store, capsys)
    assert "SUCCESSFUL (damaged: 1)" in rows["a"] and "damaged" not in rows["b"]
    assert len(err) == 1 and err[0].startswith(f"warning: committed file {store.url}/{path} "
                                               "has 10 bytes; manifest runs/a/tasks/")
    assert "(truncated or changed after its commit) (run a is marked)" in err[0]
    code, out, err = _cli(capsys, "status", "a", "--store", store.url)
    assert code == 0 and "status=SUCCESSFUL (damaged: 1)" in out and "iter-0000/blob" in out
    assert err.count("\n") == 1 and f"{store.url}/{path} has 10 bytes" in err


def test_deleted_metrics_are_flagged_one_line_per_run_by_ls(store, capsys):
    paths = _parquet(store, "a")
    for path in paths[:2]:
        store.delete(path)
    rows, err = _ls(store, capsys)
    assert "(damaged: 2)" in rows["a"] and len(err) == 1
    assert f"committed file {store.url}/{paths[0]} is missing; manifest " in err[0]
    assert "(and 1 more: `alignflow status a` names each)" in err[0]
    _, _, err = _cli(capsys, "status", "a", "--store", store.url)
    assert [p in err for p in paths] == [True, True, False]


def test_a_truncated_manifest_is_flagged_by_ls(store, capsys):
    rel = runs.manifest_path("a", "iter-0002/blob")
    store.write_bytes(rel, store.read_bytes(rel)[:20])
    rows, err = _ls(store, capsys)
    assert "(damaged: 1)" in rows["a"] and "damaged" not in rows["b"]
    assert len(err) == 1 and f"{store.url}/{rel} is not valid JSON" in err[0]


def test_ls_reads_no_new_manifest_of_a_running_run(store, capsys):
    """Cheap for a live run: only its journal snapshot; `status` reads the rest."""
    runs.update_run(store, "a", status=runs.RUNNING)
    store.delete(runs.journal_path("a"))  # every manifest is newer than the snapshot
    store.delete(_parquet(store, "a")[0])
    with Lease(store, "a", ttl=30).acquire():
        rows, err = _ls(store, capsys)
        assert rows["a"].split()[2] == runs.RUNNING and err == []
        _, _, err = _cli(capsys, "status", "a", "--store", store.url)
        assert "is missing" in err


def _checkpoint(store) -> dict[str, bytes]:
    """A model checkpoint folder as `checkpoints.save` leaves it, committed by run `a`."""
    files = {"model.safetensors": b"w" * 64, "state.safetensors": b"s" * 32, "state.json": b"{}"}
    for name, data in files.items():
        store.write_bytes(f"runs/a/ckpt/m/{name}", data)
    store.write_json("runs/a/ckpt/m/meta.json", {"format": 1, "tied": {}, "saved": 0.0,
                                                  "files": {n: len(d) for n, d in files.items()}})
    commit(store, "a", "save-0", {"checkpoint": "runs/a/ckpt/m", "worker": "actor"})
    return files


def test_status_checks_whole_checkpoints_against_their_meta(store, capsys):
    _checkpoint(store)
    assert _cli(capsys, "status", "a", "--store", store.url)[2] == ""
    store.write_bytes("runs/a/ckpt/m/model.safetensors", b"w" * 7)
    store.delete("runs/a/ckpt/m/state.json")
    code, out, err = _cli(capsys, "status", "a", "--store", store.url)
    assert code == 0 and "(damaged: 2)" in out
    lines = err.splitlines()
    assert len(lines) == 2 and f"{store.url}/runs/a/ckpt/m/model.safetensors is 7 bytes; " \
        "runs/a/ckpt/m/meta.json records 64 bytes" in lines[0]
    assert f"{store.url}/runs/a/ckpt/m/state.json is missing" in lines[1]


def test_a_pruned_checkpoint_is_not_damage(store, capsys):
    _checkpoint(store)
    store.delete("runs/a/ckpt/m", recursive=True)  # hosts keep the last ckpt.max_num
    code, out, err = _cli(capsys, "status", "a", "--store", store.url)
    assert code == 0 and err == "" and "damaged" not in out
