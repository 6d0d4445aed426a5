"""How `alignflow sql` ends, whatever it is doing: on a signal, or at its time limit.

SIGTERM, SIGHUP and (outside the interactive shell) Ctrl-C end the command: it writes
`interrupted`, its spill folder is removed, and the process ends by that same signal, so a
shell sees 143 for SIGTERM (130 for Ctrl-C), the status it also sees for a signal that came
before these handlers were set. The Python handler does nothing but let
`signal.set_wakeup_fd` wake a thread: it never raises. A handler that raised
KeyboardInterrupt had it raised inside DuckDB, wherever DuckDB next checked for signals,
and under load the SQL child once died of SIGABRT instead (DuckDB's crash when a query is
torn down by a Python exception, duckdb#10699). The thread stops the work through DuckDB's
own `interrupt()` (`deadline.stop_all`), repeated until the command has unwound; the main
thread sees an ordinary interrupted query and closes the catalog (removing the spill
folder) on its way out.

The time limit covers the whole command: the catalog's opening has its deadline, and the
query gets what is left of the same limit. Some work looks at no interrupt (DuckDB binding
one huge statement, a Python read): `GRACE_S` after a signal, or after the time limit, the
thread ends the process itself, the spill folder removed and the command's line written
(the signal, or exit status 2 and the time limit's error). Only for a process started from
a shell: called in-process (tests), nothing is killed and KeyboardInterrupt is raised.
"""

from __future__ import annotations

import os
import select
import signal
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

from alignflow.catalog import spill

GRACE_S = 3.0
_POLL_S = 0.1  # how often a stop is repeated (a statement started after the last one)
_ENDING = (signal.SIGTERM, signal.SIGHUP)


class _Watch:
    """The thread that turns a signal or the passed time limit into the command's end."""

    def __init__(self, wake: int, signals: set[int], until: float | None, late: str,
                 hard: bool) -> None:
        self.wake, self.signals, self.until, self.late, self.hard = wake, signals, until, late, hard
        self.signum: int | None = None  # the signal that is ending the command
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.is_set():
            wait = None if self.until is None else self.until + GRACE_S - time.monotonic()
            if wait is not None and wait <= 0:
                if self.hard:
                    _end(2, f"error: {self.late}")
                wait = None  # not from a shell: the soft deadlines end it
            ready, _, _ = select.select([self.wake], [], [], wait)
            if not ready:
                continue
            data = os.read(self.wake, 64)  # one byte per signal: its number
            if not data:
                return  # the command is over (the write end is closed)
            ours = [n for n in data if n in self.signals]
            if ours:
                self._stop(ours[0])
                return

    def _stop(self, signum: int) -> None:
        """Interrupt everything, again until the command has unwound; by force after GRACE_S."""
        from alignflow.catalog import deadline

        self.signum = signum
        end = time.monotonic() + GRACE_S
        deadline.stop_all()
        while not self.done.wait(_POLL_S):
            if self.hard and time.monotonic() > end:
                die(signum)
            deadline.stop_all()


@contextmanager
def bounded(timeout_s: float | None, late: str, *, ctrl_c: bool, hard: bool) -> Iterator[float]:
    """Inside, a signal (SIGTERM, SIGHUP; with `ctrl_c` SIGINT too) ends the command, and
    `timeout_s` (None: no limit for the whole command) bounds it, `late` being the error
    line should it have to end by force. `hard` (a process started from a shell): the
    process ends by the signal itself (`die`), else KeyboardInterrupt is raised. Yields the
    `time.monotonic()` time at which the limit passes."""
    until = None if timeout_s is None else time.monotonic() + timeout_s
    wake, woken = os.pipe()
    os.set_blocking(woken, False)
    ours = {*_ENDING, *([signal.SIGINT] if ctrl_c else [])}
    watch = _Watch(wake, {int(s) for s in ours}, until, late, hard)
    try:
        old = {s: signal.signal(s, _note) for s in ours}
        old_fd = signal.set_wakeup_fd(woken, warn_on_full_buffer=False)
    except ValueError:  # not the main thread: signals are not ours to take
        old, old_fd = {}, None
    thread = threading.Thread(target=watch.run, name="alignflow-sql-end", daemon=True)
    thread.start()
    try:
        yield float("inf") if until is None else until
    except BaseException:
        if watch.signum is None:
            raise  # whatever the interrupt broke below, the signal is what ended it
    finally:
        watch.done.set()
        if old_fd is not None:
            signal.set_wakeup_fd(old_fd)
        for s, handler in old.items():
            signal.signal(s, handler)
        os.close(woken)  # the thread reads the end of the pipe and returns
        thread.join()
        os.close(wake)
    if watch.signum is not None:  # also when the work was done just as the signal came
        if hard:
            die(watch.signum)
        raise KeyboardInterrupt


def die(signum: int) -> None:
    """End this process by `signum`, as if no handler had caught it: a shell sees exit
    status 128 + signum (143 for SIGTERM), the same as for a signal that came before the
    handlers were set. Its spill folders go first; from any thread."""
    import ctypes

    spill.remove_own()
    os.write(2, b"interrupted\n")
    libc = ctypes.CDLL(None)
    libc.signal.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.signal(signum, None)  # SIG_DFL: the process-wide disposition, from any thread
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)  # not reached: the signal ended the process


def _end(code: int, line: str) -> None:
    """End this process at once with `code` and `line` on stderr, its spill folders gone."""
    spill.remove_own()
    os.write(2, (line + "\n").encode())
    os._exit(code)


def _note(_signum: int, _frame: object) -> None:
    """The signal's byte is already in the wakeup pipe; the thread acts on it."""
