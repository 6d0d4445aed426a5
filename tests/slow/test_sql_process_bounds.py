"""`alignflow sql` bounds its whole process (issue 20 §5), checked on real child processes:
its peak resident memory (the kernel's VmHWM), how fast a signal ends it, and the spill
folder it leaves (none)."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tests.fast.test_catalog_data import populate

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]
SORT = "SELECT range AS i, md5(range::VARCHAR) AS h FROM range(30000000) ORDER BY h"


@pytest.fixture
def store(local_store):
    populate(local_store)
    return local_store


def _start(store, *argv: str, out=subprocess.DEVNULL) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "alignflow.cli", "sql", *argv, "--store",
                             store.url], cwd=ROOT, stdout=out, stderr=subprocess.PIPE,
                            text=True)


def _peak_mib(proc: subprocess.Popen, limit_s: float = 60) -> float:
    """Wait for `proc`; its peak resident memory in MiB (polled VmHWM)."""
    peak, start = 0, time.monotonic()
    while proc.poll() is None and time.monotonic() - start < limit_s:
        try:
            with open(f"/proc/{proc.pid}/status") as f:
                peak = max(peak, next(int(line.split()[1]) for line in f
                                      if line.startswith("VmHWM:")))
        except (OSError, StopIteration):
            pass
        time.sleep(0.01)
    proc.wait(timeout=5)
    return peak / 1024


def _spill_folders(pid: int) -> list[str]:
    return glob.glob(os.path.join(tempfile.gettempdir(), f"alignflow-sql-{pid}-*"))


def test_a_huge_value_fails_cleanly_within_the_process_bound(store):
    proc = _start(store, "SELECT repeat('x', 1000000000) AS s", "--memory-limit", "256MB",
                  "--format", "csv")
    peak = _peak_mib(proc)
    err = proc.stderr.read()
    assert proc.returncode == 2 and err.count("\n") == 1, err
    assert err.startswith("error: SQL stopped: `SELECT repeat('x', 1000000000) AS s` needs "
                          "more than the 244 MiB memory limit (--memory-limit")
    assert peak < 1024  # a bare process is ~200 MiB; unbounded it reached 4 GiB


def test_a_big_result_streams_out_in_bounded_memory(store, tmp_path):
    with open(tmp_path / "out.json", "w") as out:
        proc = _start(store, "SELECT range AS i, md5(range::VARCHAR) AS h FROM range(3000000)",
                      "--format", "json", "--max-rows", "3000000", "--memory-limit", "256MB",
                      "--timeout", "100", out=out)
        peak = _peak_mib(proc, 100)
    assert proc.returncode == 0, proc.stderr.read()
    assert (tmp_path / "out.json").stat().st_size > 150 * 2**20
    assert peak < 600  # the whole result as Python objects took ~1.5 GiB


def test_sigterm_interrupts_the_query_and_removes_the_spill_folder(store):
    proc = _start(store, SORT, "--memory-limit", "64MB", "--format", "csv", "--timeout", "60")
    time.sleep(4)
    assert proc.poll() is None and _spill_folders(proc.pid)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert time.monotonic() - start < 5
    assert proc.returncode == 130 and proc.stderr.read() == "interrupted\n"
    assert _spill_folders(proc.pid) == []


def test_a_killed_sql_leaves_its_spill_folder_to_the_next_one(store):
    proc = _start(store, SORT, "--memory-limit", "64MB", "--format", "csv", "--timeout", "60")
    time.sleep(4)
    left = _spill_folders(proc.pid)
    proc.kill()
    proc.wait()
    assert left and all(os.path.exists(p) for p in left)
    again = _start(store, "SELECT 1 AS x")
    assert again.wait(timeout=60) == 0
    assert _spill_folders(proc.pid) == []
