"""Hostile stores and runaway SQL (issue 20 §4, §5): seconds and peak RSS of each command.

    .venv/bin/python bench/store_bounds.py [--only NAME] [--rows 10000000]

Each case sets up a store with two finished runs (`a`, `b` of tests/flows_for_tests.py's
`steps`, plus the catalog test runs r1, r2), tampers with it, and runs one `alignflow`
command in a child process. The child is watched: killed past 4 GB RSS or 40 s (a case may
allow more time), so a case that ran away before the fix cannot take the shared machine
down. Peak RSS is the child's own high-water mark (VmHWM, polled every 20 ms). Printed: one
markdown row per case (seconds, peak RSS, exit status, stdout size, the last stderr line,
and for a case run under `--memory-limit` its peak against the limit plus
`limits.RSS_MARGIN`), for bench/RESULTS.md.
"""

from __future__ import annotations

import argparse
import glob
import json
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "bench")]
KILL_RSS, KILL_S = 4 * 2**30, 40.0
ENDLESS = "SELECT sum(hash(range)) AS n FROM range(100000000000)"  # ~1,000 s here
SCALARS = "SELECT iteration, prompt_id, sample_idx, response, reward FROM rollouts"
SPILL = "SELECT range AS i, md5(range::VARCHAR) AS h FROM range(30000000) ORDER BY h"


@dataclass
class Case:
    name: str
    setup: Callable[[Path], None]
    argv: Callable[[Path], list[str]]
    term_after: float | None = None  # send SIGTERM after this many seconds
    kill_s: float = KILL_S


def _finished(tmp: Path) -> None:
    from alignflow.artifacts.store import Store
    from alignflow.flows.control import api
    from tests import flows_for_tests as F
    from tests.fast.test_catalog_data import populate

    store = Store.open(str(tmp / "store"))
    populate(store)
    (tmp / "counts").mkdir(exist_ok=True)
    for run_id in ("a", "b"):
        api.run(F.steps, {"dir": str(tmp / "counts"), "n": 2}, store=store, run_id=run_id,
                executor="inline")


def _tamper(change: Callable[[Path], None]) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        _finished(tmp)
        change(tmp / "store" / "runs")
    return setup


def _zero(runs: Path) -> None:
    (runs / "a" / "run.json").unlink()
    (runs / "a" / "run.json").symlink_to("/dev/zero")


def _fifo(runs: Path) -> None:
    os.mkfifo(runs / "a" / "tasks" / "step-9.json")
    os.mkfifo(runs / "r1" / "tasks" / "fifo.json")


def _deep(runs: Path) -> None:
    (runs / "a" / "run.json").write_bytes(b"[" * 1_000_000)


def _huge(runs: Path) -> None:
    with open(runs / "a" / "run.json", "wb") as f:  # valid JSON, 1 GB of padding
        f.write(b'{"run_id": "a", "status": "SUCCESSFUL", "pad": "')
        f.write(b"x" * 2**30)
        f.write(b'"}')


def _wide(tmp: Path) -> None:
    """Run r3 commits one rollouts file of 100,000 columns (issue 40: 29 minutes)."""
    import pyarrow as pa

    from alignflow.artifacts.store import Store
    from tests.fast.test_catalog_opening import commit_rollouts

    _finished(tmp)
    columns = {f"c{i}": pa.array([i], pa.int32()) for i in range(100_000)}
    commit_rollouts(Store.open(str(tmp / "store")), "r3", columns, "wide")


def _two_stores(tmp: Path) -> None:
    _finished(tmp)
    shutil.copytree(tmp / "store", tmp / "other")


def _overwritten(tmp: Path) -> None:
    """Store `other`, one of r1's committed rollout files replaced by a query result (what
    `sql --out --force` did before it refused stores): 12 rows of both runs."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    _two_stores(tmp)
    manifest = tmp / "other" / "runs" / "r1" / "tasks" / "iter-0000" / "generate.json"
    victim = tmp / "other" / json.loads(manifest.read_text())["artifacts"][0]["path"]
    files = sorted((tmp / "store" / "runs").rglob("rollouts/*/*.parquet"))
    pq.write_table(pa.concat_tables([pq.read_table(f) for f in files]), victim)


def _rows_store(rows: int) -> Callable[[Path], None]:
    def setup(tmp: Path) -> None:
        from sql import generate

        generate(str(tmp / "store"), rows)
    return setup


def _sql(query: str, *flags: str) -> Callable[[Path], list[str]]:
    return lambda tmp: ["sql", query, "--store", str(tmp / "store"), *flags]


def _out_over_committed(tmp: Path) -> list[str]:
    victim = sorted((tmp / "other" / "runs" / "r1" / "rollouts").rglob("*.parquet"))[0]
    return ["sql", "SELECT * FROM rollouts", "--store", str(tmp / "store"), "--format",
            "parquet", "--out", str(victim), "--force"]


def cases(rows: int) -> list[Case]:
    store = lambda cmd: lambda tmp: [*cmd, "--store", str(tmp / "store")]  # noqa: E731
    runs_q = "SELECT run_id, status, problem FROM runs ORDER BY 1"
    return [
        Case("run.json -> /dev/zero: ls", _tamper(_zero), store(["ls"])),
        Case("run.json -> /dev/zero: sql", _tamper(_zero), _sql(runs_q)),
        Case("run.json -> /dev/zero: tick", _tamper(_zero), store(["tick"])),
        Case("run.json -> /dev/zero: resume --all", _tamper(_zero), store(["resume", "--all"])),
        Case("FIFO manifest: status a", _tamper(_fifo), store(["status", "a"])),
        Case("FIFO manifest: sql", _tamper(_fifo), _sql(runs_q)),
        Case("FIFO manifest: ls", _tamper(_fifo), store(["ls"])),
        Case("run.json nested 1e6 deep: ls", _tamper(_deep), store(["ls"])),
        Case("run.json nested 1e6 deep: sql", _tamper(_deep), _sql(runs_q)),
        Case("run.json of 1 GiB: ls", _tamper(_huge), store(["ls"])),
        Case("run.json of 1 GiB: sql", _tamper(_huge), _sql(runs_q)),
        Case(f"{rows:,}-row --format json, --memory-limit 100MB --timeout 5", _rows_store(rows),
             _sql("SELECT * FROM rollouts", "--format", "json", "--memory-limit", "100MB",
                  "--timeout", "5")),
        Case("100,000-column committed Parquet: sql --timeout 2 --memory-limit 256MB", _wide,
             _sql("SELECT run_id, count(*) AS n FROM rollouts GROUP BY 1", "--timeout", "2",
                  "--memory-limit", "256MB", "--format", "csv"), kill_s=120),
        Case("SELECT 1, --memory-limit 256MB (the fixed cost)", _finished,
             _sql("SELECT 1 AS x", "--memory-limit", "256MB")),
        Case("30M-row spilling sort, --memory-limit 256MB", _finished,
             _sql(SPILL, "--memory-limit", "256MB", "--format", "csv", "--max-rows", "30000000",
                  "--max-bytes", "8GiB", "--timeout", "100"), kill_s=120),
        Case("4,000 rows of 100 kB, --memory-limit 256MB", _finished,
             _sql("SELECT repeat('x', 100000) AS s FROM range(4000)", "--memory-limit", "256MB",
                  "--format", "csv")),
        Case("repeat('x', 1e9), --memory-limit 256MB", _finished,
             _sql("SELECT repeat('x', 1000000000) AS s", "--memory-limit", "256MB",
                  "--format", "csv")),
        Case("--timeout 1e308 on an endless query", _finished,
             _sql(ENDLESS, "--timeout", "1e308")),
        Case("--threads 100000", _finished, _sql("SELECT 1 AS x", "--threads", "100000")),
        Case("--memory-limit 1000000TB", _finished,
             _sql("SELECT 1 AS x", "--memory-limit", "1000000TB")),
        Case("default memory limit", _finished,
             _sql("SELECT current_setting('memory_limit') AS m")),
        Case("SIGTERM while spilling: spill folder left", _finished,
             _sql(SPILL, "--memory-limit", "64MB", "--format", "csv", "--timeout", "30"),
             term_after=4.0),
        Case("--out --force onto another store's committed Parquet", _two_stores,
             _out_over_committed),
        Case("sql on a store whose committed Parquet was overwritten", _overwritten,
             lambda tmp: ["sql", "SELECT run_id, iteration, count(*) AS n FROM rollouts GROUP "
                          "BY ALL ORDER BY ALL", "--store", str(tmp / "other"), "--format",
                          "csv"]),
        Case(f"{rows:,}-row --format csv, default caps", _rows_store(rows),
             _sql(SCALARS, "--format", "csv")),
        Case(f"{rows:,}-row --format json, --max-rows {rows} --timeout 600", _rows_store(rows),
             _sql("SELECT * FROM rollouts", "--format", "json", "--max-rows", str(rows),
                  "--max-bytes", "8GiB", "--timeout", "600"), kill_s=300),
    ]


def _spill_dirs() -> set[str]:
    return set(glob.glob(os.path.join(tempfile.gettempdir(), "alignflow-sql-*")))


def _memory(ps: psutil.Process, peak: int) -> tuple[int, int]:
    """(RSS now, peak RSS so far). The peak is the kernel's high-water mark of the child's
    own address space (VmHWM); wait4's ru_maxrss would count the forking parent's pages."""
    try:
        with open(f"/proc/{ps.pid}/status") as f:
            fields = dict(line.split(":", 1) for line in f if ":" in line)
        hwm = int(fields.get("VmHWM", "0 kB").split()[0]) * 1024
        return int(fields.get("VmRSS", "0 kB").split()[0]) * 1024, max(peak, hwm)
    except (OSError, ValueError):
        return 0, peak


def _watch(proc: subprocess.Popen, term_after: float | None,
           kill_s: float) -> tuple[str, float, tuple]:
    """Wait for `proc` (reaped with wait4, for its own peak RSS); kill it past KILL_RSS or
    KILL_S. (how it ended, seconds, (exit code, peak RSS))."""
    start, ps, termed, killed = time.monotonic(), psutil.Process(proc.pid), False, ""
    peak = 0
    while True:
        pid, status, _ = os.wait4(proc.pid, os.WNOHANG)
        elapsed = time.monotonic() - start
        if pid:
            return killed, elapsed, (os.waitstatus_to_exitcode(status), peak)
        rss, peak = _memory(ps, peak)
        if term_after is not None and elapsed > term_after and not termed:
            proc.send_signal(signal.SIGTERM)
            termed = True
        if not killed and (rss > KILL_RSS or elapsed > kill_s):
            proc.kill()
            killed = f"killed at {rss / 2**30:.1f} GiB RSS after {elapsed:.0f} s"
        time.sleep(0.02)


def _setup_in_child(case: Case, tmp: Path) -> None:
    """Build the store in a forked child, so this process stays small while it watches."""
    child = multiprocessing.get_context("fork").Process(target=case.setup, args=(tmp,))
    child.start()
    child.join()
    if child.exitcode:
        raise RuntimeError(f"setup of {case.name!r} failed (exit {child.exitcode})")


def run_case(case: Case, tmp: Path) -> str:
    _setup_in_child(case, tmp)
    before = _spill_dirs()
    out = open(tmp / "stdout", "wb")  # noqa: SIM115 - the child writes it
    proc = subprocess.Popen([sys.executable, "-m", "alignflow.cli", *case.argv(tmp)], cwd=tmp,
                            stdout=out, stderr=subprocess.PIPE, env=os.environ)
    killed, seconds, (proc.returncode, peak) = _watch(proc, case.term_after, case.kill_s)
    err = proc.stderr.read().decode(errors="replace").strip().splitlines()
    out.close()
    left = _spill_dirs() - before
    stdout = (tmp / "stdout").read_bytes()
    said = killed or (err[-1] if err else stdout[:120].decode(errors="replace").strip())
    said = said[:160].replace("|", "\\|").replace("\n", " ")
    extra = f"; {len(left)} spill folder(s) left" if case.term_after else ""
    for path in left:
        shutil.rmtree(path, ignore_errors=True)
    return (f"| {case.name} | {seconds:.2f} | {peak / 2**20:.0f} | "
            f"{proc.returncode} | {len(stdout):,} B{extra} | {said} | {_bound(case, tmp, peak)} |")


def _bound(case: Case, tmp: Path, peak: int) -> str:
    """Peak RSS against `--memory-limit` + `RSS_MARGIN`, for a case run under a limit."""
    from alignflow.catalog.limits import RSS_MARGIN, parse_memory

    argv = case.argv(tmp)
    if "--memory-limit" not in argv:
        return ""
    bound = parse_memory(argv[argv.index("--memory-limit") + 1]) + RSS_MARGIN
    return f"{peak / 2**20:.0f} {'≤' if peak <= bound else '>'} {bound / 2**20:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="run the cases whose name contains this")
    parser.add_argument("--rows", type=int, default=10_000_000)
    args = parser.parse_args()
    from alignflow.catalog.limits import RSS_MARGIN

    print(f"RSS margin (limits.RSS_MARGIN): {RSS_MARGIN / 2**20:.0f} MiB over --memory-limit")
    print("| case | seconds | peak RSS MiB | exit | stdout | last line | peak vs limit + margin, "
          "MiB |")
    print("|---|---|---|---|---|---|---|")
    for case in cases(args.rows):
        if args.only and args.only not in case.name:
            continue
        with tempfile.TemporaryDirectory(prefix="alignflow-bounds-") as tmp:
            print(run_case(case, Path(tmp)), flush=True)



if __name__ == "__main__":
    main()
