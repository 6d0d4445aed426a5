"""Durable sleep and durable event waits, as journal entries of the driver.

`sleep` commits its wake time first (`sleep-<n>` manifest, output `{"wake": t}`), so a
restarted driver sleeps only what is left. `wait_for` commits the event's payload when the
event file `runs/<run_id>/events/<name>.json` appears. A non-blocking driver (`tick`) does
not wait: it suspends the run (SLEEPING) and a later tick resumes it when due.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from alignflow.artifacts.store import Store, open_store
from alignflow.flows.journal import codec, runs
from alignflow.flows.journal.runs import read_run

POLL = 0.5


class Suspended(BaseException):
    """Raised in a non-blocking driver at a sleep or event wait that is not yet due."""

    def __init__(self, wake_at: float | None, waiting_for: str | None = None) -> None:
        super().__init__(f"suspended until {wake_at} / event {waiting_for}")
        self.wake_at, self.waiting_for = wake_at, waiting_for


def event_path(run_id: str, name: str) -> str:
    return f"runs/{run_id}/events/{name}.json"


def send_event(run_id: str, name: str, payload: Any = None, *, store: Store | str | None = None) -> None:
    """Deliver event `name` to run `run_id` (a flow waiting in `wait_for(name)` wakes up)."""
    store = open_store(store)
    read_run(store, run_id)
    store.write_json(event_path(run_id, name), {"payload": codec.encode(payload),
                                                "sent": time.time()})


class Timers:
    """Mixin for `Driver`: `durable_sleep` and `wait_for`."""

    if TYPE_CHECKING:  # what it uses of the `Driver` it is mixed into
        store: Store
        run_id: str
        manifests: dict[str, dict]
        replayed: int
        block: bool

        def boundary(self, force: bool = False) -> None: ...

        def next_key(self, base: str, explicit: str | None) -> str: ...

        def commit(self, task: Any, key: str, input_hash: str | None, fields: dict) -> dict: ...

    def durable_sleep(self, seconds: float, key: str | None) -> None:
        self.boundary()
        key = self.next_key("sleep", key)
        manifest = self.manifests.get(key)
        if manifest is None:
            now = time.time()
            manifest = self.commit(None, key, None, {
                "status": "SUCCESSFUL", "output": {"wake": now + seconds}, "attempts": 1,
                "started": now, "ended": now})
        else:
            self.replayed += 1
        wake = manifest["output"]["wake"]
        while (left := wake - time.time()) > 0:
            if not self.block:
                raise Suspended(wake)
            time.sleep(min(left, POLL))
            self.boundary()

    def wait_for(self, event: str, timeout: float | None, key: str | None) -> Any:
        self.boundary()
        key = self.next_key(f"wait-{event}", key)
        if key in self.manifests:
            self.replayed += 1
            return codec.decode(self.manifests[key]["output"]["payload"],
                                runs.manifest_path(self.run_id, key))
        deadline = None if timeout is None else time.time() + timeout
        rel = event_path(self.run_id, event)
        while not self.store.exists(rel):
            if not self.block:
                raise Suspended(deadline, event)
            if deadline is not None and time.time() >= deadline:
                self._commit_event(key, event, None)
                return None
            time.sleep(POLL)
            self.boundary()
        payload = self.store.read_json(rel)["payload"]
        self._commit_event(key, event, payload)
        return codec.decode(payload, rel)

    def _commit_event(self, key: str, event: str, payload: Any) -> None:
        now = time.time()
        self.commit(None, key, None, {"status": "SUCCESSFUL", "attempts": 1, "started": now,
                                      "ended": now, "output": {"event": event, "payload": payload}})
