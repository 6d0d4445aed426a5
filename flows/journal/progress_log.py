"""The driver's progress, kept in the store, so any machine that sees the store can follow
a run (`alignflow logs -f RUN`) and say what it is doing now (`alignflow status`).

Lines go to `runs/<run>/progress/<segment>.log`: each driver starts a new segment (numbered
on from the ones there), a segment holds at most `SEGMENT_BYTES` and at most `SEGMENTS` are
kept (the oldest deleted), so a run's progress never grows past 2 MiB. A store has no
append, so the open segment is rewritten whole at each flush (at most every `FLUSH_S`, and
when the driver ends). `now.json` holds what runs now: tasks, since when, their last beat.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time

from alignflow.artifacts.store import Store

SEGMENT_BYTES = 256 << 10
SEGMENTS = 8
FLUSH_S = 2.0
_SEGMENT = re.compile(r"/(\d{6})\.log$")


def folder(run_id: str) -> str:
    return f"runs/{run_id}/progress"


def segments(store: Store, run_id: str) -> list[str]:
    """The run's progress segments, oldest first."""
    return sorted(p for p in store.list(folder(run_id)) if _SEGMENT.search(p))


def _number(path: str) -> int:
    """A segment's number (`segments` lists only paths that have one)."""
    found = _SEGMENT.search(path)
    return int(found.group(1)) if found else -1


class ProgressLog:
    """Progress lines of one driver, written to the store (never failing the run)."""

    def __init__(self, store: Store, run_id: str) -> None:
        self.store, self.run_id = store, run_id
        self.lock = threading.Lock()
        self.text, self.dirty, self.flushed = "", False, 0.0
        done = segments(store, run_id)
        self.number = _number(done[-1]) + 1 if done else 0

    def write(self, line: str) -> None:
        with self.lock:
            if len(self.text) + len(line) + 1 > SEGMENT_BYTES:
                self._flush()
                self.number, self.text = self.number + 1, ""
            self.text += line + "\n"
            self.dirty = True
        if time.monotonic() - self.flushed >= FLUSH_S:
            self.flush()

    def flush(self) -> None:
        with self.lock:
            self._flush()

    def _flush(self) -> None:
        if not self.dirty:
            return
        with contextlib.suppress(Exception):  # progress is never worth failing a run for
            self.store.write_bytes(f"{folder(self.run_id)}/{self.number:06d}.log",
                                   self.text.encode())
            for old in segments(self.store, self.run_id)[:-SEGMENTS]:
                self.store.delete(old)
        self.dirty, self.flushed = False, time.monotonic()

    def now(self, running: dict[str, dict]) -> None:
        """Record what runs now (task key -> {started, beat}) in `now.json`."""
        with contextlib.suppress(Exception):
            self.store.write_json(f"{folder(self.run_id)}/now.json",
                                  {"at": time.time(), "running": running})


def read_now(store: Store, run_id: str) -> dict:
    """`now.json` of the run ({} when none, or unreadable)."""
    with contextlib.suppress(Exception):
        return store.read_json(f"{folder(run_id)}/now.json")
    return {}
