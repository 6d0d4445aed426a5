"""A warm spare's imports, done in the machine's idle time until the spare is given work.

A spare is for the next fault; the processes beside it (a group restoring, the step it runs
again, the engines) are what the run waits for now. Imported at full speed, the two spares
asked after a lost node took the CPU from the step the run was waiting for: the learn run
again after a lost node took 1.8–2.6 s against 0.4 s (`bench/RESULTS.md`, Chaos). An
unprivileged process cannot lower a thread's priority and raise it again once the spare is
needed, so the spare paces itself instead: it imports on a side thread, measures the share
of a core that thread got over each slice, and steps aside while others want the CPU —
until its worker is given work (Ray's main loop runs something, or the main thread
imports), from when on the rest is imported at full speed.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import threading
import time
from types import FrameType

from alignflow.timeline import mark

SLICE_S = 0.05  # the share of a core is measured over this much wall time
SHARE = 0.75  # under this share others were waiting for the CPU: step aside
BACKOFF_S = 0.2  # for this long, looking every STEP_S whether the worker got work
STEP_S = 0.01
RAY_LOOP = "main_loop"  # Ray's worker loop (ray/_private/worker.py), idle between tasks


class WarmImports:
    """Imports `names` on a side thread, paced while the worker is idle; `finish` joins it."""

    def __init__(self, names: list[str]) -> None:
        self.names = names
        self.arrived = threading.Event()  # the worker was given work: no more pacing
        self.thread = threading.Thread(target=self._run, name="alignflow-warm-imports",
                                       daemon=True)
        self._main = threading.main_thread().ident
        self._since = self._cpu = 0.0
        self.backoffs = 0

    def start(self) -> None:
        sys.meta_path.insert(0, self)  # asked before every module: the place to pace
        self.thread.start()

    def finish(self) -> None:
        """The worker has work: import the rest at full speed and wait for it."""
        self.arrived.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join()

    def find_spec(self, name: str, path: object = None, target: object = None) -> None:
        """A meta path finder that finds nothing: it only paces the side thread."""
        if threading.get_ident() == self.thread.ident:
            self._pace()

    def _run(self) -> None:
        self._since, self._cpu = time.monotonic(), time.thread_time()
        try:
            for name in self.names:
                with contextlib.suppress(Exception):  # the task importing it reports it
                    importlib.import_module(name)
        finally:
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
        mark("spare imported")

    def _pace(self) -> None:
        now = time.monotonic()
        if self.arrived.is_set() or now - self._since < SLICE_S:
            return
        share = (time.thread_time() - self._cpu) / (now - self._since)
        if share < SHARE:
            self.backoffs += 1
            end = now + BACKOFF_S
            while time.monotonic() < end and not self._worker_busy():
                time.sleep(STEP_S)
        self._since, self._cpu = time.monotonic(), time.thread_time()

    def _worker_busy(self) -> bool:
        """Whether the main thread runs work (then no more pacing) or waits on an import."""
        if self.arrived.is_set():
            return True
        frame = sys._current_frames().get(self._main)
        if frame is None:
            return True
        if frame.f_code.co_filename.startswith("<frozen importlib"):
            return True  # maybe for a module this thread holds: never make it wait
        if frame.f_code.co_name != RAY_LOOP and _in_ray_loop(frame.f_back):
            self.arrived.set()  # Ray's loop runs a task or builds an actor
            return True
        return False


def _in_ray_loop(frame: FrameType | None) -> bool:
    while frame is not None:
        if frame.f_code.co_name == RAY_LOOP:
            return True
        frame = frame.f_back
    return False
