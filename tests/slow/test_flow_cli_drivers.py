"""Two real driver processes on one run: the second is refused with a one-line LeaseHeld;
after the first is SIGKILLed mid-sleep, a plain `resume` takes over at once (the lease's
owner provably died) and sleeps only what is left of the durable sleep."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from alignflow.artifacts.store import Store
from alignflow.flows.journal.lease import lease_expired

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def alignflow(store: str, *args: str, **popen) -> subprocess.Popen:
    env = dict(os.environ, ALIGNFLOW_STORE=store, ALIGNFLOW_LEASE_TTL="2")
    return subprocess.Popen([sys.executable, "-m", "alignflow.cli", *args], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def finish(proc: subprocess.Popen) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


def test_second_driver_refused_then_plain_resume_after_kill(tmp_path):
    store, counts = str(tmp_path / "store"), tmp_path / "counts"
    counts.mkdir()
    first = alignflow(store, "run", "tests.flows_for_tests:sleepy", "--run-id", "s",
                      "--executor", "inline", "--set", f"dir={counts}", "--set", "seconds=10")
    sleep_manifest = tmp_path / "store/runs/s/tasks/sleep-0.json"
    deadline = time.time() + 60
    while not sleep_manifest.exists():
        assert time.time() < deadline and first.poll() is None, first.stderr.read()
        time.sleep(0.05)

    code, _out, err = finish(alignflow(store, "resume", "s", "--executor", "inline",
                                       "--flow", "tests.flows_for_tests:sleepy"))
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: run 's' is held by driver ")

    first.send_signal(signal.SIGKILL)
    first.wait()
    # the lease has not expired, but its driver provably died on this machine
    code, out, _ = finish(alignflow(store, "status", "s"))
    assert "status=RESUMABLE" in out.splitlines()[0]

    t0 = time.time()
    code, out, err = finish(alignflow(store, "resume", "s", "--flow",
                                      "tests.flows_for_tests:sleepy"))
    assert code == 0, err
    assert out.strip() == '["before","after"]'
    # a fresh sleep would end >= 10 s after t0; the rest of the first one ends well before
    assert time.time() - t0 < 10.0
    assert (counts / "before.count").read_text() == "x\n"
    assert (counts / "after.count").read_text() == "x\n"


def test_sigterm_marks_resumable_and_releases_the_lease(tmp_path):
    store, counts = str(tmp_path / "store"), tmp_path / "counts"
    counts.mkdir()
    proc = alignflow(store, "run", "tests.flows_for_tests:sleepy", "--run-id", "t",
                     "--executor", "inline", "--set", f"dir={counts}", "--set", "seconds=30")
    sleep_manifest = tmp_path / "store/runs/t/tasks/sleep-0.json"
    deadline = time.time() + 60
    while not sleep_manifest.exists():
        assert time.time() < deadline and proc.poll() is None
        time.sleep(0.05)
    proc.send_signal(signal.SIGTERM)
    code, _out, err = finish(proc)
    assert code == 130, err
    assert lease_expired(Store.open(store), "t")  # released, not left to expire
    code, out, _ = finish(alignflow(store, "status", "t"))
    assert "status=RESUMABLE" in out.splitlines()[0]
