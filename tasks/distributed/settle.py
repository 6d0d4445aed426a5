"""Let gloo's worker threads finish before the interpreter is torn down.

A gloo process group keeps its worker threads (`pt_gloo_runloop`) for as long as anything
holds the group (ZeRO-3's parameters do, to the end), and `destroy_process_group` does not
stop them. A worker that finishes a collective drops its hold on the collective's tensors,
and when that is the last hold on a tensor Python still knows, it takes the GIL to release
it. Once Python has begun finalising, a thread that asks for the GIL is ended on the spot
(CPython 3.11 `pthread_exit`s it), and ending a thread inside a C++ destructor aborts the
process: SIGABRT, "terminate called without an active exception" (core dump: the worker in
`~AsyncAllgatherWork` → `decref_pyobject` → `take_gil` → `PyThread_exit_thread`, the main
thread in `Py_FinalizeEx`). On a busy machine the worker is often still waiting for a core
when a rank that has nothing left to do reaches finalisation, so a rank that finished its
work failed its torchrun job.

`settle` is called at exit with the group left: it releases the GIL in short sleeps until
every gloo worker thread waits for new work (blocked on its queue's condition variable with
no deadline, as `/proc/self/task/*/syscall` shows; one waiting for the GIL waits with a
deadline), which is when none of them can need the GIL again; bounded, so a collective
that will never finish (a dead peer) does not hold the exit up.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

WORKER_NAME = "pt_gloo_runloop"  # a worker takes this name once it has run a collective
FUTEX = {"x86_64": 202, "aarch64": 98}.get(os.uname().machine)
PAUSE_S = 0.002
QUIET_READINGS = 3  # in a row, each after a pause that left the GIL free


def _busy(task: Path) -> bool:
    """Whether the thread runs (on a core, or preempted outside a system call: "-1"), or
    waits with a deadline (a thread waiting for the GIL does; an idle gloo worker waits on
    its queue with none)."""
    try:
        fields = (task / "syscall").read_text().split()
    except OSError:
        return False  # ended, or not ours to read
    if fields[0] in ("running", "-1"):
        return True
    return len(fields) > 4 and fields[0] == str(FUTEX) and int(fields[4], 16) != 0


def workers_busy(own: str | None = None) -> list[int]:
    """The gloo worker threads of this process that may still need the GIL: those named as
    workers, and the native threads still bearing the process's own name `own` (a worker
    before its first collective is done), that run or wait with a deadline."""
    own = own or Path("/proc/self/comm").read_text().strip()
    python_threads = {t.native_id for t in threading.enumerate()}
    busy = []
    for task in Path("/proc/self/task").iterdir():
        try:
            tid, name = int(task.name), (task / "comm").read_text().strip()
        except (OSError, ValueError):
            continue
        if tid in python_threads or name not in (WORKER_NAME, own):
            continue
        if _busy(task):
            busy.append(tid)
    return busy


def settle(limit_s: float = 2.0) -> bool:
    """Pause (GIL released) until no gloo worker may need the GIL; False when `limit_s` ran
    out first."""
    if FUTEX is None or not Path("/proc/self/task").is_dir():
        return True  # no /proc to read: nothing to wait on
    own = Path("/proc/self/comm").read_text().strip()  # read once, not at every pause
    deadline, quiet = time.monotonic() + limit_s, 0
    while quiet < QUIET_READINGS:
        if time.monotonic() > deadline:
            return False
        time.sleep(PAUSE_S)
        quiet = 0 if workers_busy(own) else quiet + 1
    return True
