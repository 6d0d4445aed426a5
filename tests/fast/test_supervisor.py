"""The supervisor's own decisions (`flows/cli/supervise.py`), with real child processes: it
leaves a Ray connection it made to check the plan before its first driver joins (held, it
doubled the head's per-client server start and a driver's Ray Client connection timed out
in CI; Ray is a stand-in here, the real path is tests/infra/test_manifests_run.py); it backs
off only from drivers that die before committing anything (a crash loop), never from one
killed after progress. The whole restart path: tests/slow/test_supervise.py."""

from __future__ import annotations

import sys
import types

from alignflow.flows.cli.supervise import Supervisor


def test_the_supervisor_leaves_ray_before_its_driver_starts(fast_store, monkeypatch):
    events: list[str] = []
    joined = {"on": True}
    ray = types.SimpleNamespace(is_initialized=lambda: joined["on"],
                                shutdown=lambda: (events.append("shutdown"),
                                                  joined.update(on=False)))
    monkeypatch.setitem(sys.modules, "ray", ray)
    import subprocess

    real_popen = subprocess.Popen

    def popen(*args, **kwargs):
        events.append("driver")
        return real_popen(*args, **kwargs)

    monkeypatch.setattr(subprocess, "Popen", popen)
    code = Supervisor(fast_store, "r", [sys.executable, "-c", "pass"], []).loop()
    assert code == 0 and events == ["shutdown", "driver"]


def _dies(store_root: str, commit: str | None) -> list[str]:
    """A driver that commits task `commit` (if any) and is then killed."""
    write = (f"import pathlib; p = pathlib.Path({store_root!r}, 'runs/r/tasks/{commit}.json'); "
             "p.parent.mkdir(parents=True, exist_ok=True); p.write_text('{}'); ") if commit else ""
    return [sys.executable, "-c", write + "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"]


def test_backoff_only_for_drivers_that_died_without_progress(local_store, monkeypatch):
    from alignflow.flows.journal import runs

    local_store.write_json(runs.run_json("r"), {"run_id": "r", "status": "RUNNING"})
    waits: list[float] = []
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.5")
    commands = iter([_dies(local_store.root, "a"), _dies(local_store.root, "b"),
                     _dies(local_store.root, None), _dies(local_store.root, None),
                     [sys.executable, "-c", "pass"]])
    sup = Supervisor(local_store, "r", next(commands), [])
    sup.pause = waits.append
    monkeypatch.setattr(sup, "_next", lambda code, cmd: None if code == 0 else next(commands))
    assert sup.loop() == 0 and sup.restarts == 4
    assert waits == [0.5]  # the second death in a row without a commit, and only it
