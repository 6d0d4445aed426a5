"""In-process Ray on a busy node (issue 46): its workers run at the driver's priority, and
a start that fails — here a dashboard agent that never comes up, as a slow import on a
loaded node does — is tried once more with one line, then fails with one error, and leaves
no Ray process of its sessions alive, nor does a SIGTERM of the driver while Ray starts.

Ray's processes are found the way `flows/ray/reap.py` finds them, written again here: by
the session folder on their command line or as their stdout/stderr."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(sys.platform != "linux", reason="/proc, Ray's fate sharing")]
ROOT = Path(__file__).resolve().parents[2]
# A dashboard agent stuck before it writes its port file: Ray's raylet gives up on it
# after its fixed 15 s and exits; the agent, reparented to init, stays (before the fix).
STUCK_AGENT = """import sys, threading
if sys.argv and sys.argv[0].endswith("dashboard/agent.py"):
    threading.Event().wait()
"""

NICE = r"""
import json, os, sys
os.nice(int(sys.argv[1]))
import ray
from alignflow.flows.ray import local
local.TEMP_DIR = sys.argv[2]
local.start(quiet=True)
here = lambda: os.getpriority(os.PRIO_PROCESS, 0)
print(json.dumps({"driver": here(), "worker": ray.get(ray.remote(here).remote())}))
local.stop(exiting=True)
"""


@pytest.fixture
def temp_dir() -> Iterator[str]:
    """Short (Ray's socket paths live under it) and this test's own."""
    folder = tempfile.mkdtemp(prefix="afrs-", dir="/tmp")
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _ray_pids(folder: str) -> list[str]:
    inside, found = folder + "/", []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            lines = [entry.joinpath("cmdline").read_bytes().decode(errors="replace")]
            lines += [os.readlink(entry / "fd" / fd) for fd in ("1", "2")
                      if os.path.lexists(entry / "fd" / fd)]
        except OSError:  # ended while we looked, or not ours
            continue
        if any(inside in line for line in lines):
            found.append(f"{entry.name} {lines[0][:120]!r}")
    return found


def _none_left(folder: str, bound_s: float = 20.0) -> list[str]:
    """Ray processes of `folder` still alive after `bound_s` (none as soon as none is)."""
    deadline = time.monotonic() + bound_s
    while (left := _ray_pids(folder)) and time.monotonic() < deadline:
        time.sleep(0.1)
    return left


@pytest.mark.parametrize(("driver_nice", "setting", "expected"),
                         [(5, None, 5), (0, "3", 3)])
def test_workers_run_at_the_drivers_priority(temp_dir, driver_nice, setting, expected):
    """Ray's default would put the worker 15 below the driver; alignflow passes 0, or the
    user's own RAY_worker_niceness."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_worker_niceness"}
    if setting is not None:
        env["RAY_worker_niceness"] = setting
    proc = subprocess.run([sys.executable, "-c", NICE, str(driver_nice), temp_dir], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"driver": driver_nice, "worker": expected}
    assert _none_left(temp_dir) == []


def _stuck_agent_env(folder: str) -> dict[str, str]:
    site = Path(folder, "site")
    site.mkdir()
    (site / "sitecustomize.py").write_text(STUCK_AGENT)
    return {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(site), os.environ.get("PYTHONPATH")) if p)}


FAILED_START = r"""
import sys
from alignflow.flows.ray import local
local.TEMP_DIR = sys.argv[1]
try:
    local.start(quiet=True)
except Exception as exc:
    print("ERROR", type(exc).__name__, getattr(exc, "kind", None), exc)
"""


def test_a_failed_start_is_tried_again_then_leaves_no_ray_process(temp_dir):
    proc = subprocess.run([sys.executable, "-c", FAILED_START, temp_dir], cwd=ROOT,
                          env=_stuck_agent_env(temp_dir), capture_output=True, text=True,
                          timeout=300)
    again = [line for line in proc.stderr.splitlines() if "trying once more" in line]
    assert len(again) == 1 and "did not start" in again[0], proc.stderr[-3000:]
    assert proc.stdout.startswith("ERROR FlowError system in-process Ray did not start in 2 "
                                  "tries"), proc.stdout + proc.stderr[-3000:]
    assert "--executor inline" in proc.stdout
    assert _none_left(temp_dir) == []


WAIT_FLOW = """from alignflow.flows.engine import flow, task


@task
def hold() -> int:
    return 0


@flow
def wait(cfg: dict) -> int:
    return hold()
"""


def test_sigterm_while_ray_starts_leaves_no_ray_process(tmp_path, temp_dir):
    """The command's early start (`flows/cli/early.py`), its agent stuck: SIGTERM once the
    agent is up ends the command through its own exit, which ends every Ray process."""
    (tmp_path / "wait_flow.py").write_text(WAIT_FLOW)
    env = {**_stuck_agent_env(temp_dir), "ALIGNFLOW_TEST_RAY_TEMP_DIR": temp_dir}
    command = [sys.executable, "-c", "import sys, os; from alignflow.flows.ray import local; "
               "local.TEMP_DIR = os.environ['ALIGNFLOW_TEST_RAY_TEMP_DIR']; "
               "from alignflow.cli import main; sys.exit(main())",
               "run", f"{tmp_path}/wait_flow.py:wait", "--executor", "ray",
               "--store", str(tmp_path / "store")]
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not any("dashboard/agent.py" in p for p in _ray_pids(temp_dir)):
            assert proc.poll() is None and time.monotonic() < deadline, "no agent came up"
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()
    assert proc.returncode != -signal.SIGTERM, err[-3000:]  # ended by its own exit path
    assert "trying once more" not in err
    assert _none_left(temp_dir) == []
