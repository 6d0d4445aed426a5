"""While tasks run, the driver says every few seconds what they are doing: how long each
has run and how far it is (the last beat it wrote: `artifacts/scope.beat`, e.g. sequences
generated, optimizer steps done), on the progress display and in the store
(`progress/now.json`, read by `alignflow status`). Between task commits a long step is then
visibly alive, in a terminal and in a plain log alike. `$ALIGNFLOW_HEARTBEAT_S` (default
10) sets the interval."""

from __future__ import annotations

import contextlib
import os
import threading
import time

from alignflow.artifacts.scope import beat_path
from alignflow.artifacts.store import Store
from alignflow.flows.journal.progress_log import ProgressLog
from alignflow.flows.journal.runs import RunState
from alignflow.flows.seams import ProgressSink


def interval() -> float:
    return max(0.5, float(os.environ.get("ALIGNFLOW_HEARTBEAT_S", "10")))


class Heartbeat:
    """A daemon thread beating for one driver; `stop()` flushes the store's log."""

    def __init__(self, store: Store, run_id: str, progress: ProgressSink) -> None:
        self.store, self.run_id, self.progress = store, run_id, progress
        self.log = ProgressLog(store, run_id)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="alignflow-heartbeat",
                                        daemon=True)

    def start(self) -> Heartbeat:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(interval()):
            with contextlib.suppress(Exception):  # a heartbeat never fails the run
                self.beat()

    def beat(self) -> None:
        running = dict(self.progress.running)
        beats = {k: b for k in running if (b := self._read(k)) is not None}
        if running:
            self.progress.heartbeat(beats)
        wall = time.time() - self.progress.clock()  # the progress clock -> epoch seconds
        self.log.now({k: {"started": wall + since, "beat": beats.get(k)}
                      for k, since in running.items()})
        self.log.flush()

    def _read(self, key: str) -> dict | None:
        rel = beat_path(self.run_id, key)
        try:
            return self.store.read_json(rel) if self.store.exists(rel) else None
        except Exception:
            return None

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.log.now({})
        self.log.flush()
        with contextlib.suppress(Exception):
            self.store.delete(f"runs/{self.run_id}/progress/beats", recursive=True)


def watch(state: RunState, name: str, progress: ProgressSink | None) -> Heartbeat | None:
    """The progress display, told the run's registered name (`rloo`, not `grpo`), its lines
    kept in the store, and its heartbeat started (none without a display)."""
    if progress is None:
        return None
    beat = Heartbeat(state.store, state.run_id, progress)
    progress.start_run(state.run_id, name, sink=beat.log)
    return beat.start()
