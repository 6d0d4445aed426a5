"""`alignflow sql` bounds its whole process (issue 20 §5, issue 40 §6), checked on real child
processes: its peak resident memory (the kernel's VmHWM), how fast a signal or its time
limit ends it, opening the catalog included, and the spill folder it leaves (none)."""

from __future__ import annotations

import glob
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pytest

from alignflow.catalog.process import GRACE_S
from tests.fast.test_catalog_data import populate
from tests.fast.test_catalog_opening import commit_rollouts

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]
ROOT = Path(__file__).resolve().parents[2]
SORT = "SELECT range AS i, md5(range::VARCHAR) AS h FROM range(30000000) ORDER BY h"
EXIT_SLACK_S = 2.0  # a process told to end: scheduling and exit on a loaded 2-core VM
# `alignflow sql` with the wide-file checks raised out of reach: a hostile file they miss.
# DuckDB then binds a view of 100,000 columns, one statement that looks at no interrupt.
# It says on stderr when the catalog starts opening and when that binding starts.
UNCHECKED = """
import sys
from alignflow.catalog import connection, shape
shape.MAX_COLUMNS, shape.MAX_FOOTER_BYTES = 10**9, 2**40
real_build, real_view = connection.build, connection._data_view
def build(*args, **kwargs):
    print("opening", file=sys.stderr, flush=True)
    return real_build(*args, **kwargs)
def view(store, built, name, rels, view=None):
    if name == "rollouts":
        print("binding", file=sys.stderr, flush=True)
    return real_view(store, built, name, rels, view)
connection.build, connection._data_view = build, view
from alignflow.cli import main
sys.exit(main())
"""


@pytest.fixture
def store(local_store):
    populate(local_store)
    return local_store


@pytest.fixture(scope="module")
def wide_store(tmp_path_factory):
    from alignflow.artifacts.store import Store

    store = Store.open(str(tmp_path_factory.mktemp("wide") / "store"))
    populate(store)
    commit_rollouts(store, "r3", {f"c{i}": pa.array([i], pa.int32()) for i in range(100_000)},
                    "wide")
    return store


def _start(store, *argv: str, out=subprocess.DEVNULL, code: str | None = None) -> subprocess.Popen:
    head = ["-c", code] if code else ["-m", "alignflow.cli"]
    return subprocess.Popen([sys.executable, *head, "sql", *argv, "--store", store.url],
                            cwd=ROOT, stdout=out, stderr=subprocess.PIPE, text=True)


def _spilling(proc: subprocess.Popen, limit_s: float = 60) -> list[str]:
    """Wait until `proc`'s spill folder holds a file (its sort spills); the folders."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s and proc.poll() is None:
        folders = _spill_folders(proc.pid)
        if any(os.listdir(f) for f in folders if os.path.isdir(f)):
            return folders
        time.sleep(0.05)
    raise AssertionError(f"no spill file after {limit_s} s (exit {proc.poll()})")


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
    _spilling(proc)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=30)
    assert time.monotonic() - start < GRACE_S + EXIT_SLACK_S
    assert proc.returncode == -signal.SIGTERM and proc.stderr.read() == "interrupted\n"
    assert _spill_folders(proc.pid) == []


def test_sigterm_while_opening_the_catalog_ends_it(wide_store):
    proc = _start(wide_store, "SELECT count(*) AS n FROM rollouts", "--timeout", "60",
                  code=UNCHECKED)
    assert proc.stderr.readline() == "opening\n" and proc.stderr.readline() == "binding\n"
    assert _spill_folders(proc.pid)
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    proc.wait(timeout=60)
    assert time.monotonic() - start < GRACE_S + EXIT_SLACK_S  # before: after the binding
    assert proc.returncode == -signal.SIGTERM and proc.stderr.read() == "interrupted\n"
    assert _spill_folders(proc.pid) == []


def test_the_time_limit_covers_opening_the_catalog(wide_store):
    timeout = 3.0  # reached while DuckDB binds the wide view, which outlasts it + GRACE_S
    proc = _start(wide_store, "SELECT count(*) AS n FROM rollouts", "--timeout", str(timeout),
                  code=UNCHECKED)
    assert proc.stderr.readline() == "opening\n"  # the time limit began before
    start = time.monotonic()
    proc.wait(timeout=60)
    assert time.monotonic() - start < timeout + GRACE_S + EXIT_SLACK_S  # before: a minute
    [line] = [x for x in proc.stderr.read().splitlines() if x != "binding"]
    assert proc.returncode == 2 and line.startswith("error: SQL stopped: ")
    assert f"ran past the {timeout:g} s time limit" in line and "--timeout SECONDS" in line
    assert _spill_folders(proc.pid) == []


def test_a_killed_sql_leaves_its_spill_folder_to_the_next_one(store):
    proc = _start(store, SORT, "--memory-limit", "64MB", "--format", "csv", "--timeout", "60")
    left = _spilling(proc)
    proc.kill()
    proc.wait()
    assert left and all(os.path.exists(p) for p in left)
    again = _start(store, "SELECT 1 AS x")
    assert again.wait(timeout=60) == 0
    assert _spill_folders(proc.pid) == []
