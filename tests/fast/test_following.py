"""Following a run from anywhere: the driver's progress lines are kept in the store,
bounded and rotated; `alignflow logs -f` prints them; a task's beats reach the heartbeat;
`status` names the task running now and for how long."""

from __future__ import annotations

import io
import time

from alignflow.artifacts.scope import TaskScope, beat, use_scope
from alignflow.cli import main
from alignflow.flows.cli.follow import follow, running_now
from alignflow.flows.control import api
from alignflow.flows.control.heartbeat import Heartbeat
from alignflow.flows.journal import progress_log, runs
from tests import flows_for_tests as F


def test_progress_lines_are_kept_in_the_store_bounded_and_rotated(local_store, monkeypatch):
    monkeypatch.setattr(progress_log, "SEGMENT_BYTES", 100)
    monkeypatch.setattr(progress_log, "SEGMENTS", 3)
    log = progress_log.ProgressLog(local_store, "r")
    for i in range(40):
        log.write(f"line {i:02d} " + "x" * 20)
    log.flush()
    kept = progress_log.segments(local_store, "r")
    assert len(kept) == 3  # the oldest are gone
    assert local_store.read_bytes(kept[-1]).decode().splitlines()[-1].startswith("line 39")
    assert progress_log.ProgressLog(local_store, "r").number == int(kept[-1][-10:-4]) + 1


def test_logs_follow_prints_the_drivers_progress(local_store, tmp_path, capsys):
    (tmp_path / "c").mkdir()
    assert main(["run", "tests/flows_for_tests.py:steps", "--set", f"dir={tmp_path / 'c'}",
                 "--set", "n=2", "--executor", "inline", "--run-id", "r", "--store",
                 local_store.url]) == 0
    printed = capsys.readouterr().err
    out = io.StringIO()
    assert follow(local_store, "r", out=out) == 0  # the run is over: everything, then stop
    lines = out.getvalue().splitlines()
    assert lines[0] == "[run r] start flow steps" and "finished flow steps" in lines[-1]
    assert all(line in printed for line in lines)


def test_beats_reach_the_heartbeat_and_status(local_store, capsys):
    api.run(F.steps, {"dir": "/nonexistent", "n": 0}, store=local_store, run_id="r",
            executor="inline")
    with use_scope(TaskScope(local_store, "r", "iter-0003/generate", seed=1)):
        beat(24, 64, "sequences")

    class Shown:  # what the heartbeat asks of the progress display
        clock = staticmethod(time.monotonic)
        running = {"iter-0003/generate": time.monotonic() - 42}
        beats: dict = {}

        def heartbeat(self, beats):
            self.beats = beats

    shown = Shown()
    Heartbeat(local_store, "r", shown).beat()
    assert shown.beats == {"iter-0003/generate": {"done": 24, "total": 64, "unit": "sequences",
                                                  "at": shown.beats["iter-0003/generate"]["at"]}}
    assert running_now(local_store, "r") == ["iter-0003/generate running 42s: 24/64 sequences"]
    runs.update_run(local_store, "r", status=runs.RUNNING)
    from alignflow.flows.journal.lease import Lease

    lease = Lease(local_store, "r").acquire()  # a live driver
    try:
        assert main(["status", "r", "--store", local_store.url]) == 0
    finally:
        lease.release()
    assert "now: iter-0003/generate running 42s: 24/64 sequences" in capsys.readouterr().out


def test_a_runs_duration_leaves_out_the_time_it_sat_interrupted(local_store, tmp_path):
    from alignflow.catalog.catalog import Catalog

    (tmp_path / "c").mkdir()
    api.run(F.steps, {"dir": str(tmp_path / "c"), "n": 2}, store=local_store, run_id="r",
            executor="inline")
    meta = runs.read_run(local_store, "r")
    runs.update_run(local_store, "r", created=meta["created"] - 3600)  # an hour idle before
    api.resume("r", store=local_store, rerun_from="step-1", executor="inline")
    with Catalog(local_store) as cat:
        duration = cat.sql("SELECT duration FROM runs WHERE run_id = 'r'").to_pylist()[0]
    assert duration["duration"] < 60  # what its two drivers ran, not the hour between
