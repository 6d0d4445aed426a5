"""Lean in-process Ray: no dashboard, monitor or log-monitor process; the warm pool actor
runs plain tasks and becomes the first worker group's host (one process, not two)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import json, os, sys, psutil
from alignflow.flows.control import api
from alignflow.flows.ray import local as ray_local, pool as ray_pool
from tests import pool_flows as F
ray_local.start_early(lambda: ray_pool.create(("tests.pool_flows",)))
out = api.run(F.pids, {}, store=sys.argv[1], run_id="p")
def cmdline(p):
    try:
        return " ".join(p.cmdline())
    except psutil.Error:  # ended while we looked (e.g. a short-lived helper process)
        return ""
names = [c for c in map(cmdline, psutil.Process().children(recursive=True)) if c]
print(json.dumps({"out": out, "procs": names}))
"""


def test_lean_ray_and_one_warm_process(tmp_path):
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "store")], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    joined = "\n".join(result["procs"])
    for gone in ("dashboard/dashboard.py", "autoscaler/_private/monitor.py", "log_monitor.py"):
        assert gone not in joined, joined
    plain, worker = result["out"]
    assert plain == worker  # the plain task ran in the pool actor that then hosted the group


ORPHANS = r"""
import ctypes, json, os, subprocess, sys, time
import psutil
ctypes.CDLL(None).prctl(36, 1)  # PR_SET_CHILD_SUBREAPER: the command's orphans become ours
code = subprocess.run(sys.argv[1:]).returncode
def alive():
    while True:  # reap the ones that ended
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                break
        except ChildProcessError:
            break
    return [p for p in psutil.Process().children() if p.status() != psutil.STATUS_ZOMBIE]
deadline = time.time() + 10
while alive() and time.time() < deadline:
    time.sleep(0.05)
print(json.dumps({"code": code, "left": [p.name() for p in alive()]}))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="a Linux subreaper collects the orphans")
def test_command_leaves_no_ray_process(tmp_path):
    """`run --executor ray` exits without `ray.shutdown()`: its node (GCS, raylet, agents,
    workers) ends with it all the same (issue 25: the orderly stop cost 0.3-0.5 s). A
    subreaper runs the command, so whatever outlives it is found by parentage, not by name."""
    command = [sys.executable, "-m", "alignflow.cli", "run", "tests/pool_flows.py:pids",
               "--executor", "ray", "--store", str(tmp_path / "store")]
    proc = subprocess.run([sys.executable, "-c", ORPHANS, *command], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["code"] == 0, proc.stderr[-3000:]
    assert result["left"] == []
