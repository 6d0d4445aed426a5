"""A supervisor runs no flow: a Ray connection it made to check the plan (`--address`) is
closed before its first driver joins (held, it doubled the head's per-client server start
and a driver's own Ray Client connection timed out in CI). Ray itself is a stand-in here:
the real two-node path is tests/infra/test_manifests_run.py."""

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
