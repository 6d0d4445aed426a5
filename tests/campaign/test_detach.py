"""`alignflow run --detach` returns the run id at once; the run finishes in the background."""

from __future__ import annotations

import os
import subprocess
import sys
import time

from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from alignflow.flows.journal import runs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cli(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "alignflow.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)


def test_detach_returns_the_id_and_the_run_finishes(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    store = tmp_path / "store"
    start = time.time()
    proc = _cli("run", "tests.flows_for_tests:sleepy", "--detach", "--executor", "inline",
                "--store", str(store), "--set", f"dir={tmp_path}", "--set", "seconds=3",
                env=env)
    assert proc.returncode == 0, proc.stderr
    run_id = proc.stdout.strip()
    assert run_id.startswith("sleepy-") and "log:" in proc.stderr
    assert time.time() - start < 30
    s = Store.open(str(store))
    assert api.get_status(run_id, store=s) in (runs.RUNNING, runs.SUCCESSFUL)
    deadline = time.time() + 60
    while api.get_status(run_id, store=s) != runs.SUCCESSFUL:
        assert time.time() < deadline, api.get_metadata(run_id, store=s)
        time.sleep(0.3)
    assert api.get_output(run_id, store=s) == ["before", "after"]


def test_detach_with_a_bad_flag_fails_in_the_foreground(tmp_path):
    proc = _cli("run", "grpo", "--detach", "--no_such_flag", "1", "--store",
                str(tmp_path / "s"), env=dict(os.environ))
    assert proc.returncode == 2 and "unknown flag '--no_such_flag'" in proc.stderr
    assert not (tmp_path / "s").exists()
