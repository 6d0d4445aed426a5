"""A store this process cannot write (a read-only filesystem, or folders it has no
permission on) makes `run`, `resume`, `cancel`, `delete` and `gc --delete` fail with one
line naming the store and the path, not a bare `OSError` (issue 40 §8); `ls` and `status`
still read it. Root writes through any mode bits, so the read-only filesystem is made by
refusing, below the store's root, the OS calls that change a folder (as the kernel would)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from alignflow.cli import main
from alignflow.flows.control import api
from tests import flows_for_tests as F

pytestmark = pytest.mark.timeout(120)
CHANGING = ("mkdir", "link", "rename", "replace", "unlink", "rmdir")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


@pytest.fixture
def store(local_store, tmp_path):
    """Finished run `a` of `steps`, and an orphan file for `gc --delete` to remove."""
    (tmp_path / "counts").mkdir()
    api.run(F.steps, {"dir": str(tmp_path / "counts"), "n": 2}, store=local_store,
            run_id="a", executor="inline")
    local_store.write_bytes("runs/a/metrics/stray.parquet", b"left by a dead task")
    return local_store


def _target(path, kwargs: dict) -> str:
    """The absolute path an OS call acts on (relative to its `dir_fd` when given)."""
    fd = next((kwargs[k] for k in ("dir_fd", "src_dir_fd") if kwargs.get(k) is not None), None)
    base = os.readlink(f"/proc/self/fd/{fd}") if fd is not None else os.getcwd()
    return os.path.join(base, os.fsdecode(path))


def _refuse_below(monkeypatch, root: str, code: int) -> None:
    """Every call that would change something below `root` fails with `code`; creating a
    folder that exists still says it exists, as on a read-only mount."""
    root = os.path.realpath(root)

    def guarded(name, real):
        def call(*args, **kwargs):
            path = _target(args[0], kwargs)
            inside = path == root or path.startswith(root + "/")
            writes = name != "open" or args[1] & WRITE_FLAGS
            if inside and writes and not (name == "mkdir" and os.path.lexists(path)):
                raise OSError(code, os.strerror(code), os.path.basename(path))
            return real(*args, **kwargs)
        return call

    for name in (*CHANGING, "open"):
        monkeypatch.setattr(os, name, guarded(name, getattr(os, name)))


COMMANDS = {
    "resume": (["resume", "a"], "runs/a/lease/000000000002.json"),
    "run": ([], "runs/z/run.json"),  # filled in by the test: the flow file's path
    "cancel": (["cancel", "a"], "runs/a/run.json"),
    "delete": (["delete", "a"], "runs/a/lease/000000000002.json"),
    "gc": (["gc", "--delete"], "runs/a/metrics/stray.parquet"),
}


def _argv(command: str) -> list[str]:
    if command == "run":
        return ["run", f"{Path(F.__file__)}:steps", "--run-id", "z", "--executor", "inline"]
    return COMMANDS[command][0]


@pytest.mark.parametrize("code", [errno.EROFS, errno.EACCES], ids=["read-only", "denied"])
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_write_refused_names_the_store_and_the_path(store, capsys, monkeypatch, command,
                                                      code):
    _refuse_below(monkeypatch, store.root, code)
    assert main([*_argv(command), "--store", store.url]) == 2
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err and "OSError" not in err, err
    path = COMMANDS[command][1]
    said = {errno.EROFS: f"error: store {store.url} is read-only (writing {path}): this "
                         "command writes to the store; `ls`, `status`",
            errno.EACCES: f"error: store {store.url}: permission denied on {path} "
                          "(Permission denied); run, resume, delete and gc --delete need"}
    assert err.startswith(said[code]), err
    assert main(["ls", "--store", store.url]) == 0  # still read, nothing changed
    assert main(["status", "a", "--store", store.url]) == 0
    assert "SUCCESSFUL" in capsys.readouterr().out
    assert store.exists("runs/a/metrics/stray.parquet")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through mode bits")
def test_a_store_without_write_permission_is_named(store, capsys):
    folders = [store.root, *(d for d, _, _ in os.walk(store.root))]
    for folder in folders:
        os.chmod(folder, 0o555)
    try:
        assert main(["resume", "a", "--store", store.url]) == 2
    finally:
        for folder in folders:
            os.chmod(folder, 0o755)
    err = capsys.readouterr().err
    assert err.startswith(f"error: store {store.url}: permission denied on runs/a/lease/")
