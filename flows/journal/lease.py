"""The driver lease: `runs/<run_id>/lease/<generation>.json`, so two drivers never run one run
at once.

A lease is a numbered generation, and the newest file is the lease. A driver takes over
generation g (missing, expired, released, or held by a driver that provably died) by
creating generation g + 1 with a create-once write: of two drivers racing for the same
expired lease exactly one creates g + 1, the other gets `LeaseHeld`, as does a driver that
finds, after its create, a newer generation than its own (it read a stale listing).
Generations older than the last `KEPT` are then removed; the newest is never deleted, only
marked released, so generation numbers never go back and a slow driver cannot reuse one.
The holder's heartbeat thread rewrites its own file every TTL/6 s and notices a newer
generation (someone took over).

"Provably dead" (`owner_gone`) means: the owner ran on this machine (same hostname and boot
id) and its pid is not alive, or is alive but started at another time (the pid was reused;
start times are compared in clock ticks since boot, which no clock change moves).
Then a plain resume takes over. `force=True` never runs beside a live driver: it asks the
holder to stop (a `<generation>.stop.json` file its heartbeat notices; the holder stops at
its next task boundary, commits nothing more and releases), and takes over once the lease is
released, expired, or its heartbeat has stopped (two beats missed: a driver on another
machine that is gone). A holder that is alive but does not stop within its TTL keeps the
run, and `force` says so.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
import uuid
from typing import TypeGuard

from alignflow.artifacts.store import Store
from alignflow.errors import CommitConflict, LeaseHeld
from alignflow.flows.journal import procinfo

DEFAULT_TTL = 30.0
KEPT = 8  # newest generations never removed (`Lease._prune` says why)


def lease_dir(run_id: str) -> str:
    return f"runs/{run_id}/lease"


def lease_path(run_id: str, generation: int) -> str:
    return f"{lease_dir(run_id)}/{generation:012d}.json"


def stop_path(run_id: str, generation: int) -> str:
    """Where `--force` asks the holder of `generation` to stop."""
    return f"{lease_dir(run_id)}/{generation:012d}.stop.json"


def ttl_seconds() -> float:
    return float(os.environ.get("ALIGNFLOW_LEASE_TTL", DEFAULT_TTL))


def generations(store: Store, run_id: str) -> list[int]:
    """Lease generations present in the store, oldest first (one LIST)."""
    found = []
    for rel in store.list(lease_dir(run_id), "*.json"):
        stem = rel.rsplit("/", 1)[-1][:-len(".json")]
        if stem.isdigit():
            found.append(int(stem))
    return sorted(found)


def read_lease(store: Store, run_id: str) -> tuple[int, dict | None]:
    """(newest generation, its record); (0, None) when the run never had a lease. A record
    that is gone (a newer one replaced it) or unreadable is None: nobody holds it."""
    gens = generations(store, run_id)
    if not gens:
        return 0, None
    try:
        return gens[-1], store.read_json(lease_path(run_id, gens[-1]))
    except (FileNotFoundError, ValueError):
        return gens[-1], None


def is_live(record: dict | None, now: float | None = None) -> TypeGuard[dict]:
    """Held and not expired (a released lease is not live)."""
    if not record or record.get("released"):
        return False
    return float(record.get("expires", 0)) > (time.time() if now is None else now)


def lease_expired(store: Store, run_id: str, now: float | None = None) -> bool:
    """Nobody holds the lease: none, expired, released, or its driver provably died."""
    _gen, record = read_lease(store, run_id)
    return not is_live(record, now) or owner_gone(record.get("owner", {}))


def owner_gone(owner: dict) -> bool:
    """True only when the owner provably died: it ran on this machine and its process is
    gone (pid not alive, or the pid now belongs to a process started at another time)."""
    if owner.get("host") != socket.gethostname() or owner.get("boot") != procinfo.boot_id():
        return False
    try:
        pid = int(owner["pid"])
        if owner.get("pid_ticks") is not None and procinfo.HAS_PROC:
            return procinfo.start_ticks(pid) != int(owner["pid_ticks"])
        started = procinfo.start_time(pid)
    except (KeyError, TypeError, ValueError):
        return False
    if started is None:
        return True
    recorded = owner.get("pid_started")
    return recorded is not None and abs(float(recorded) - started) > 1.0


class Lease:
    """A held lease with its heartbeat thread; `lost` turns True if another driver took it."""

    def __init__(self, store: Store, run_id: str, ttl: float | None = None) -> None:
        self.store, self.run_id = store, run_id
        self.ttl = ttl or ttl_seconds()
        self.owner = {"host": socket.gethostname(), "boot": procinfo.boot_id(),
                      "pid": os.getpid(), "pid_started": procinfo.own_start_time(os.getpid()),
                      "pid_ticks": procinfo.start_ticks(os.getpid()),
                      "uuid": uuid.uuid4().hex}
        self.generation = 0
        self.lost = False  # another driver took the lease, or asked this one to stop
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self, released: bool = False) -> dict:
        now = time.time()
        return {"owner": self.owner, "heartbeat": now,
                "expires": now if released else now + self.ttl, "released": released}

    def acquire(self, force: bool = False) -> Lease:
        """Take the lease or raise `LeaseHeld` naming the owner and the expiry; `force`
        first asks a live holder to stop and waits until it has (`_stopped`)."""
        gen, current = read_lease(self.store, self.run_id)
        if is_live(current) and not owner_gone(current["owner"]):
            if not force:
                raise _held(self.run_id, current)
            gen, current = self._stopped(gen, current)
        try:
            self.store.create_json(lease_path(self.run_id, gen + 1), self._record())
        except CommitConflict:  # another driver took generation gen + 1 first
            raise _held(self.run_id, read_lease(self.store, self.run_id)[1] or {}) from None
        self.generation = gen + 1
        present = generations(self.store, self.run_id)
        if present and present[-1] > self.generation:  # we read a stale newest: not ours
            raise _held(self.run_id, read_lease(self.store, self.run_id)[1] or {})
        self._prune(present)
        self._thread = threading.Thread(target=self._beat, name="alignflow-lease", daemon=True)
        self._thread.start()
        return self

    def _prune(self, present: list[int]) -> None:
        """Remove generations older than the last `KEPT`, and older stop requests. The
        kept tail is what keeps generation numbers from going back: a listing made while a
        takeover creates one file and deletes another may miss both (a store's listing is
        not a snapshot), and with only the newest kept a driver whose listing missed them
        read "no lease" and could create generation 1 beside the holder's; the kept ones
        are not touched by a takeover, so such a driver's create names an existing
        generation and is refused."""
        for old in present:
            if old <= self.generation - KEPT:
                with contextlib.suppress(OSError):
                    self.store.delete(lease_path(self.run_id, old))
            if old < self.generation:  # a stop request to a superseded holder is done
                with contextlib.suppress(OSError):
                    if self.store.exists(stop_path(self.run_id, old)):
                        self.store.delete(stop_path(self.run_id, old))

    def _stopped(self, gen: int, current: dict) -> tuple[int, dict | None]:
        """Ask the holder of `gen` to stop, then wait (up to its TTL) until the lease is
        released, expired, taken, or its heartbeat stopped; `LeaseHeld` if it beats on."""
        self.store.write_json(stop_path(self.run_id, gen), {"by": self.owner, "at": time.time()})
        period = max(float(current.get("expires", 0)) - float(current.get("heartbeat", 0)), 1.0)
        beat, deadline = current.get("heartbeat"), time.time() + period
        last_change = time.time()
        while time.time() < deadline:
            time.sleep(min(0.2, period / 12))
            gen_now, record = read_lease(self.store, self.run_id)
            if gen_now != gen or not is_live(record):
                return gen_now, record
            if record.get("heartbeat") != beat:
                beat, last_change = record.get("heartbeat"), time.time()
            elif time.time() - last_change > max(period / 3, 0.5):  # two beats missed
                return gen_now, record
        raise LeaseHeld(f"run {self.run_id!r}: {holder(current)} was asked to stop and is still "
                        "at work (it stops at its next task boundary); run this again once it "
                        "has")

    def still_ours(self) -> bool:
        return generations(self.store, self.run_id)[-1:] == [self.generation]

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 6):
            try:
                if not self.still_ours():
                    self.lost = True
                    return
                if self.store.exists(stop_path(self.run_id, self.generation)):
                    self.lost = True  # asked to stop: beat on until released
                self.store.write_json(lease_path(self.run_id, self.generation), self._record())
            except OSError:
                continue  # a transient store fault: try again at the next beat

    def stop_heartbeat(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> Lease:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.release()

    def release(self) -> None:
        """Stop the heartbeat and mark the lease released if it is still ours."""
        self.stop_heartbeat()
        with contextlib.suppress(OSError):
            if self.generation and self.still_ours():
                self.store.write_json(lease_path(self.run_id, self.generation),
                                      self._record(released=True))


def holder(lease: dict) -> str:
    """`driver host:pid (lease 1a2b3c4d) until <time>` for messages."""
    owner = lease.get("owner", {})
    until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(lease.get("expires", 0)))
    return (f"driver {owner.get('host')}:{owner.get('pid')} (lease "
            f"{str(owner.get('uuid', '?'))[:8]}) until {until}")


def _held(run_id: str, lease: dict) -> LeaseHeld:
    return LeaseHeld(f"run {run_id!r} is held by {holder(lease)}; stop that driver or wait "
                     "for the lease to expire (--force takes over a lease whose driver you "
                     "know is gone)")
