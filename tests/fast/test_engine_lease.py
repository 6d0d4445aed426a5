"""The driver lease: live leases refuse, dead local owners are taken over without --force,
racing drivers never both win, the heartbeat notices a takeover."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from alignflow.errors import LeaseHeld
from alignflow.flows.control import api
from alignflow.flows.journal import lease, procinfo, runs
from alignflow.flows.journal.lease import Lease, generations, lease_path, read_lease
from tests import flows_for_tests as F


@pytest.fixture
def folder(tmp_path):
    path = tmp_path / "counts"
    path.mkdir()
    return str(path)


@pytest.fixture(autouse=True)
def fast_retries(monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.01")


def _crashed(store, folder, run_id="r"):
    """A run whose driver died after step-0: RUNNING, step-1 uncommitted."""
    api.run(F.steps, {"dir": folder, "n": 2}, store=store, run_id=run_id, executor="inline")
    store.delete(runs.manifest_path(run_id, "step-1"))
    runs.update_run(store, run_id, status=runs.RUNNING)


def _foreign_lease(store, run_id, *, expires_in, pid=1, host="other-host", **owner):
    """A newer lease generation held by someone else."""
    now = time.time()
    gen = read_lease(store, run_id)[0] + 1
    owner = {"host": host, "pid": pid, "uuid": "f" * 32, **owner}
    store.write_json(lease_path(run_id, gen), {"owner": owner, "heartbeat": now,
                                               "expires": now + expires_in})
    return gen


def _local_owner(pid: int, started: float | None) -> dict:
    return {"host": socket.gethostname(), "boot": procinfo.boot_id(), "pid": pid,
            "pid_started": started}


def test_a_live_lease_of_another_host_is_refused_unless_forced(fast_store, folder):
    _crashed(fast_store, folder)
    gen = _foreign_lease(fast_store, "r", expires_in=3)
    assert api.get_status("r", store=fast_store) == runs.RUNNING
    with pytest.raises(LeaseHeld, match=r"held by driver other-host:1 \(lease ffffffff\) until"):
        api.resume("r", store=fast_store)
    assert F.count(folder, "step-1") == 1
    start = time.time()  # the user vouches: its heartbeat has stopped (two beats missed)
    assert len(api.resume("r", store=fast_store, force=True)) == 2
    assert 1.0 - 0.2 <= time.time() - start < 3  # asked, then waited for the missed beats
    assert not fast_store.exists(lease.stop_path("r", gen))  # the request is cleaned up


def test_force_asks_a_live_driver_to_stop_and_never_runs_beside_it(fast_store, folder,
                                                                    monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_LEASE_TTL", "1.2")
    first: dict = {}

    def drive_first() -> None:
        try:
            api.run(F.training, {"iters": 40, "pause": 0.1}, store=fast_store, run_id="t",
                    executor="inline")
        except Exception as exc:  # stopped by the second driver
            first["error"] = str(exc)
    thread = threading.Thread(target=drive_first)
    thread.start()
    while not fast_store.exists(runs.manifest_path("t", "iter-0002/train")):
        time.sleep(0.05)
    out = api.resume("t", store=fast_store, force=True)
    thread.join(timeout=30)
    assert "asked this one to stop" in first["error"] or "stopped" in first["error"]
    assert out["checkpoint"].endswith("w-0039.safetensors")
    assert api.get_status("t", store=fast_store) == runs.SUCCESSFUL
    manifests = runs.read_manifests(fast_store, "t")
    assert len(manifests) == 40 and len({m["seq"] for m in manifests.values()}) == 40


def test_expired_lease_is_taken_over_and_marked_released_at_the_end(fast_store, folder):
    _crashed(fast_store, folder)
    gen = _foreign_lease(fast_store, "r", expires_in=-1)
    assert api.get_status("r", store=fast_store) == runs.RESUMABLE
    assert len(api.resume("r", store=fast_store)) == 2
    assert generations(fast_store, "r")[-1] == gen + 1
    assert read_lease(fast_store, "r")[1]["released"] is True
    assert lease.lease_expired(fast_store, "r")


def test_plain_resume_takes_over_when_the_local_owner_died(local_store, folder):
    _crashed(local_store, folder)
    dead = subprocess.Popen(["true"])
    dead.wait()
    _foreign_lease(local_store, "r", expires_in=60, **_local_owner(dead.pid, 1.0))
    assert api.get_status("r", store=local_store) == runs.RESUMABLE  # provably gone
    assert len(api.resume("r", store=local_store)) == 2  # no --force needed


def test_a_reused_pid_does_not_keep_a_dead_drivers_lease(local_store, folder):
    _crashed(local_store, folder)
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as other:
        try:
            real = procinfo.start_time(other.pid)
            _foreign_lease(local_store, "r", expires_in=60, **_local_owner(other.pid, real))
            with pytest.raises(LeaseHeld):  # alive, same start time: a live driver
                api.resume("r", store=local_store)
            # the same pid, but the recorded driver started an hour earlier: pid reused
            _foreign_lease(local_store, "r", expires_in=60, **_local_owner(other.pid, real - 3600))
            assert len(api.resume("r", store=local_store)) == 2
        finally:
            other.kill()


def test_another_boot_or_unknown_start_is_never_taken_for_dead(local_store, folder):
    _crashed(local_store, folder)
    dead = subprocess.Popen(["true"])
    dead.wait()
    owner = _local_owner(dead.pid, 1.0) | {"boot": "another-boot"}
    _foreign_lease(local_store, "r", expires_in=60, **owner)
    with pytest.raises(LeaseHeld):
        api.resume("r", store=local_store)
    assert not lease.owner_gone(_local_owner(1, None))  # pid 1 alive, start unknown


def test_two_drivers_racing_for_an_expired_lease_exactly_one_wins(fast_store, monkeypatch):
    """Both read the expired generation before either writes (the interleaving that let
    delete + create admit both)."""
    fast_store.write_json(runs.run_json("r"), {"run_id": "r", "status": "RUNNING"})
    _foreign_lease(fast_store, "r", expires_in=-1)
    barrier, real_read, waited = threading.Barrier(2), lease.read_lease, set()

    def read_then_wait(store, run_id):
        found = real_read(store, run_id)
        if threading.get_ident() not in waited:  # each driver's first read only
            waited.add(threading.get_ident())
            barrier.wait(timeout=5)
        return found

    monkeypatch.setattr(lease, "read_lease", read_then_wait)
    outcomes: list[object] = []

    def contend():
        try:
            outcomes.append(Lease(fast_store, "r", ttl=5).acquire())
        except LeaseHeld as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=contend) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    monkeypatch.setattr(lease, "read_lease", real_read)
    winners = [o for o in outcomes if isinstance(o, Lease)]
    assert len(winners) == 1 and len(outcomes) == 2
    assert read_lease(fast_store, "r")[1]["owner"]["uuid"] == winners[0].owner["uuid"]
    winners[0].release()


def _race(store, drivers: int) -> list[Lease]:
    """`drivers` threads acquire at the same moment; returns the winners."""
    wins: list[Lease] = []
    start = threading.Event()

    def contend():
        start.wait()
        with contextlib.suppress(LeaseHeld):
            wins.append(Lease(store, "r", ttl=5).acquire())

    threads = [threading.Thread(target=contend) for _ in range(drivers)]
    for t in threads:
        t.start()
    start.set()
    for t in threads:
        t.join()
    return wins


def test_a_clock_step_does_not_make_a_live_owner_look_dead(monkeypatch):
    """Epoch start times follow the wall clock (boot time is read from it), so an NTP step
    moved a live driver's start by seconds; the ticks since boot it is judged by do not."""
    owner = Lease(None, "r").owner
    assert owner["pid_ticks"] == procinfo.start_ticks(os.getpid())
    real = procinfo.start_time
    monkeypatch.setattr(procinfo, "start_time", lambda pid: real(pid) + 5.0)  # clock stepped
    assert not lease.owner_gone(owner)
    assert lease.owner_gone({**owner, "pid_ticks": owner["pid_ticks"] - 1})  # pid reused
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    assert lease.owner_gone({**owner, "pid": int(dead)})


def test_the_newest_generations_stay_and_older_ones_go(local_store):
    """The kept tail is what a listing made during a takeover still sees (`Lease._prune`)."""
    for _ in range(lease.KEPT + 4):
        Lease(local_store, "r", ttl=5).acquire().release()
    assert generations(local_store, "r") == list(range(5, lease.KEPT + 5))


def test_a_driver_that_read_a_stale_newest_does_not_win(local_store, monkeypatch):
    Lease(local_store, "r", ttl=5).acquire().release()  # generation 1
    held = Lease(local_store, "r", ttl=5).acquire()  # generation 2, live
    monkeypatch.setattr(lease, "read_lease", lambda store, run_id: (0, None))  # saw no lease
    with pytest.raises(LeaseHeld):
        Lease(local_store, "r", ttl=5).acquire()  # its generation 1 exists: refused
    monkeypatch.setattr(lease, "read_lease", lambda store, run_id: (0, None))
    local_store.delete(lease.lease_path("r", 1))  # even where generation 1 is gone
    with pytest.raises(LeaseHeld):
        Lease(local_store, "r", ttl=5).acquire()  # it finds generation 2 after its create
    monkeypatch.undo()
    assert read_lease(local_store, "r")[1]["owner"]["uuid"] == held.owner["uuid"]
    held.release()


def test_many_racing_drivers_one_winner_per_round(local_store):
    local_store.write_json(runs.run_json("r"), {"run_id": "r", "status": "RUNNING"})
    for _ in range(5):
        wins = _race(local_store, 4)
        assert len(wins) == 1
        wins[0].release()


def test_heartbeat_extends_expiry_and_notices_a_takeover(fast_store, folder):
    _crashed(fast_store, folder)
    held = Lease(fast_store, "r", ttl=0.6).acquire()
    first = read_lease(fast_store, "r")[1]["expires"]
    time.sleep(0.35)
    assert read_lease(fast_store, "r")[1]["expires"] > first
    _foreign_lease(fast_store, "r", expires_in=60)  # a newer generation: taken over
    time.sleep(0.3)
    assert held.lost
    held.release()
    assert read_lease(fast_store, "r")[1]["owner"]["uuid"] == "f" * 32  # not ours: kept
