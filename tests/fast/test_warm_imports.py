"""A spare's imports ahead (`flows/ray/warm_imports.py`): paced while its worker is idle and
the thread gets less than its share of a core, at full speed once the worker has work."""

from __future__ import annotations

import sys
import threading
import time

import pytest

from alignflow.flows.ray import warm_imports
from alignflow.flows.ray.warm_imports import WarmImports


@pytest.fixture
def slow_modules(tmp_path, monkeypatch):
    """Modules whose import takes wall time but no CPU (to the pacing, a thread that did not
    get its share), on a machine whose CPUs are never free (others always waiting)."""
    monkeypatch.setattr(warm_imports, "stalled_s", time.monotonic)
    names = [f"warm_probe_{i}" for i in range(4)]
    for name in names:
        (tmp_path / f"{name}.py").write_text("import time\ntime.sleep(0.06)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield names
    for name in names:
        sys.modules.pop(name, None)


class FakeWorker:
    """A thread shaped like a Ray worker's main thread: idle inside Ray's loop (a C call,
    no Python frame of its own), then running a task from it."""

    def __init__(self) -> None:
        self.go, self.stop = threading.Event(), threading.Event()
        self.thread = threading.Thread(target=self.main_loop, daemon=True)

    def main_loop(self) -> None:  # the name Ray's loop has
        while not self.go.is_set():
            time.sleep(0.001)
        self.task()

    def task(self) -> None:
        while not self.stop.is_set():
            time.sleep(0.001)


@pytest.fixture
def worker():
    worker = FakeWorker()
    worker.thread.start()
    yield worker
    worker.stop.set()
    worker.go.set()


def warming_in(worker: FakeWorker, names: list[str]) -> WarmImports:
    """The imports ahead of a worker whose main thread is `worker`'s."""
    warming = WarmImports(names)
    warming._main = worker.thread.ident
    warming.start()
    return warming


def test_an_idle_worker_steps_aside_and_one_with_work_does_not(slow_modules, worker):
    warming = warming_in(worker, slow_modules)
    warming.thread.join(timeout=0.5)
    assert warming.backoffs >= 1 and warming.thread.is_alive()  # idle worker: paced
    assert not warming.arrived.is_set()
    worker.go.set()  # a task arrives in Ray's loop
    started = time.monotonic()
    warming.thread.join(timeout=5)
    assert warming.arrived.is_set() and not warming.thread.is_alive()
    assert all(name in sys.modules for name in slow_modules)
    # the rest at full speed (4 × 0.06 s of imports), where a missed arrival never ends
    assert time.monotonic() - started < 2.0


def test_finish_imports_the_rest_without_pacing(slow_modules, worker):
    warming = warming_in(worker, slow_modules)
    warming.finish()  # Ray is about to run the worker's first task
    assert all(name in sys.modules for name in slow_modules)
    assert warming not in sys.meta_path  # the pacing finder is gone with its thread


def test_a_main_thread_waiting_on_an_import_is_never_kept_waiting(slow_modules):
    warming = WarmImports(slow_modules)  # the main thread is this test's: not Ray's loop
    warming.start()
    while not warming.backoffs:  # stepping aside in the finder, holding the next module's lock
        time.sleep(0.001)
    started = time.monotonic()
    __import__(slow_modules[1])  # waits for that lock: the side thread must not back off
    assert time.monotonic() - started < 2.0  # one 0.06 s import, not an endless wait
    assert warming.thread.is_alive()  # still paced: the main thread only imported
    warming.finish()
    assert all(name in sys.modules for name in slow_modules)


def test_a_module_that_fails_is_left_to_the_task(tmp_path, monkeypatch):
    (tmp_path / "warm_broken.py").write_text("raise RuntimeError('no')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    warming = WarmImports(["warm_broken", "colorsys", "no_such_module_here"])
    sys.modules.pop("colorsys", None)
    warming.start()
    warming.finish()
    assert "colorsys" in sys.modules and "warm_broken" not in sys.modules


def test_aside_until_a_look_finds_no_task_waiting_for_a_cpu(monkeypatch):
    stalls = iter([0.0, 0.05, 0.05, 0.1, 0.1, 0.1004])  # busy, busy, then room
    monkeypatch.setattr(warm_imports, "stalled_s", lambda: next(stalls))
    warming = WarmImports([])
    warming._main = -1  # no such thread: never "busy"
    monkeypatch.setattr(warming, "_worker_busy", lambda: False)
    warming._wait_for_room()
    assert next(stalls, "all read") == "all read"  # three looks, the third found room


def test_without_psi_aside_for_a_fixed_back_off(monkeypatch):
    monkeypatch.setattr(warm_imports, "stalled_s", lambda: None)
    warming = WarmImports([])
    monkeypatch.setattr(warming, "_worker_busy", lambda: False)
    started = time.monotonic()
    warming._wait_for_room()
    assert warm_imports.BACKOFF_S <= time.monotonic() - started < warm_imports.BACKOFF_S + 1


def test_the_cpu_pressure_is_read_from_psi(tmp_path, monkeypatch):
    psi = tmp_path / "cpu.pressure"
    psi.write_text("some avg10=0.03 avg60=1.21 avg300=11.47 total=3771190302\n"
                   "full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n")
    monkeypatch.setattr(warm_imports, "PRESSURE", (str(tmp_path / "absent"), str(psi)))
    assert warm_imports.stalled_s() == 3771.190302
    monkeypatch.setattr(warm_imports, "PRESSURE", (str(tmp_path / "absent"),))
    assert warm_imports.stalled_s() is None
