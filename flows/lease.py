"""The driver lease: `runs/<run_id>/lease.json`, so two drivers never run one run at once.

A driver takes the lease with a create-once write, then a heartbeat thread extends the
expiry every TTL/6 seconds. An expired lease (its driver died) may be taken over by any
driver. A live lease is refused with `LeaseHeld`; `force=True` also takes over a live lease
whose owner is on this host and whose process is gone (it died before the lease expired).
"""

from __future__ import annotations

import os
import socket
import threading
import time
import uuid
from typing import Any

from alignflow.errors import CommitConflict, LeaseHeld

DEFAULT_TTL = 30.0


def lease_path(run_id: str) -> str:
    return f"runs/{run_id}/lease.json"


def ttl_seconds() -> float:
    return float(os.environ.get("ALIGNFLOW_LEASE_TTL", DEFAULT_TTL))


def read_lease(store: Any, run_id: str) -> dict | None:
    try:
        return store.read_json(lease_path(run_id))
    except (FileNotFoundError, ValueError):
        return None


def lease_expired(store: Any, run_id: str, now: float | None = None) -> bool:
    lease = read_lease(store, run_id)
    return lease is None or lease["expires"] <= (time.time() if now is None else now)


def _owner_dead(owner: dict) -> bool:
    """True only when the owner provably died: same host and its pid is gone."""
    if owner.get("host") != socket.gethostname():
        return False
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, OSError, ValueError):
        return False
    return False


class Lease:
    """A held lease with its heartbeat thread; `lost` turns True if another driver took it."""

    def __init__(self, store: Any, run_id: str, ttl: float | None = None) -> None:
        self.store, self.run_id = store, run_id
        self.ttl = ttl or ttl_seconds()
        self.owner = {"host": socket.gethostname(), "pid": os.getpid(), "uuid": uuid.uuid4().hex}
        self.lost = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _record(self) -> dict:
        now = time.time()
        return {"owner": self.owner, "heartbeat": now, "expires": now + self.ttl}

    def acquire(self, force: bool = False) -> Lease:
        """Take the lease or raise `LeaseHeld` naming the owner and the expiry."""
        current = read_lease(self.store, self.run_id)
        if current is not None:
            live = current["expires"] > time.time()
            if live and not (force and _owner_dead(current["owner"])):
                raise _held(self.run_id, current)
            self.store.delete(lease_path(self.run_id))
        try:
            self.store.create_json(lease_path(self.run_id), self._record())
        except CommitConflict:
            raise _held(self.run_id, read_lease(self.store, self.run_id) or {}) from None
        self._thread = threading.Thread(target=self._beat, name="alignflow-lease", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(self.ttl / 6):
            current = read_lease(self.store, self.run_id)
            if current is None or current["owner"]["uuid"] != self.owner["uuid"]:
                self.lost = True
                return
            try:
                self.store.write_json(lease_path(self.run_id), self._record())
            except OSError:
                continue  # a transient store fault: try again at the next beat

    def release(self) -> None:
        """Stop the heartbeat and delete the lease if it is still ours."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        current = read_lease(self.store, self.run_id)
        if current is not None and current["owner"]["uuid"] == self.owner["uuid"]:
            self.store.delete(lease_path(self.run_id))


def _held(run_id: str, lease: dict) -> LeaseHeld:
    owner = lease.get("owner", {})
    until = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(lease.get("expires", 0)))
    return LeaseHeld(f"run {run_id!r} is held by driver {owner.get('host')}:{owner.get('pid')} "
                     f"(lease {owner.get('uuid', '?')[:8]}) until {until}; stop that driver or "
                     "wait for the lease to expire (--force takes over when its process is gone)")
