"""A warm spare's imports, done in the machine's idle time until the spare is given work.

A spare is for the next fault; the processes beside it (a group restoring, the step it runs
again, the engines) are what the run waits for now. Imported at full speed, the two spares
asked after a lost node took the CPU from the step the run was waiting for: the learn run
again after a lost node took 1.8–2.6 s against 0.4 s (`bench/RESULTS.md`, Chaos). An
unprivileged process cannot lower a thread's priority and raise it again once the spare is
needed, so the spare paces itself instead: it imports on a side thread, and after a slice in
which that thread got less than its share of a core, it sleeps until a look at the CPU's
pressure (Linux PSI: the time runnable tasks waited for a CPU, the container's own where
it has one) finds nothing else waiting — so it imports in the idle time the run leaves —
until its worker is given work (Ray's main loop runs something, or the main thread imports),
from when on the rest is imported at full speed. Without PSI it sleeps a fixed back-off.
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
SHARE = 0.9  # under this share others were waiting for the CPU: step aside
LOOK_S = 0.05  # a look at the CPU's pressure spans this long (the thread asleep)
IDLE = 0.05  # others waited under this share of a look: the CPU has room
BACKOFF_S = 0.2  # without PSI, a step aside lasts this long
STEP_S = 0.01  # while aside, whether the worker got work is looked at this often
PRESSURE = ("/sys/fs/cgroup/cpu.pressure", "/proc/pressure/cpu")  # the container's first
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
        if (time.thread_time() - self._cpu) / (now - self._since) < SHARE:
            self.backoffs += 1
            self._wait_for_room()
        self._since, self._cpu = time.monotonic(), time.thread_time()

    def _wait_for_room(self) -> None:
        """Asleep until a look finds no other task waiting for a CPU (or, without PSI, for
        BACKOFF_S), or the worker has work."""
        aside = time.monotonic()
        while True:
            before, start = stalled_s(), time.monotonic()
            while time.monotonic() - start < LOOK_S:
                if self._worker_busy():
                    return
                time.sleep(STEP_S)
            after = stalled_s()
            if before is None or after is None:
                if time.monotonic() - aside >= BACKOFF_S:
                    return
            elif after - before < IDLE * (time.monotonic() - start):
                return

    def _worker_busy(self) -> bool:
        """Whether the main thread runs work (then no more pacing) or waits on an import."""
        if self.arrived.is_set():
            return True
        frame = sys._current_frames().get(self._main) if self._main is not None else None
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


def stalled_s() -> float | None:
    """Seconds runnable tasks have waited for a CPU so far (PSI "some"; None without it)."""
    for path in PRESSURE:
        try:
            with open(path) as fh:
                some = fh.readline().split()
        except OSError:
            continue
        for field in some:
            if field.startswith("total="):
                return int(field[6:]) / 1e6
    return None
