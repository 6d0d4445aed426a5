"""End every process of one Ray session, whoever its parent is now.

A Ray node this process started is more than its children: the raylet starts a dashboard
agent and a runtime-env agent, which outlive a raylet that dies (reparented to init, and
seen alive after SIGTERM on a loaded node, issue 46), and workers run in process groups of
their own. What they share is the session folder: the GCS and raylet name it on their
command line, and every Ray process of the session writes its stdout and stderr into
`<session>/logs/` (Ray's `services.start_ray_process` and the raylet's worker and agent
spawning redirect them there), also once `setproctitle` has renamed it
(`ray::DashboardAgent`, `ray::IDLE`). Linux only (/proc); elsewhere nothing is found.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

PROC = Path("/proc")


def session_pids(session_dir: str) -> list[int]:
    """Live processes (not this one) whose command line or stdout/stderr is in
    `session_dir`."""
    inside = session_dir.rstrip("/") + "/"
    found = []
    for entry in PROC.glob("[0-9]*"):
        pid = int(entry.name)
        if pid != os.getpid() and _belongs(entry, inside):
            found.append(pid)
    return found


def _belongs(entry: Path, inside: str) -> bool:
    """A zombie has neither (its command line is empty and its files are closed). A
    process renamed `ray::…` is looked at whole: Ray 2.60's agents write to pipes, and hold
    the raylet's log open on other descriptors."""
    cmdline = b""
    with contextlib.suppress(OSError):
        cmdline = (entry / "cmdline").read_bytes()
    if inside.encode() in cmdline:
        return True
    fds: list[str] = ["1", "2"]
    if cmdline.startswith(b"ray::"):
        with contextlib.suppress(OSError):
            fds = os.listdir(entry / "fd")
    for fd in fds:
        with contextlib.suppress(OSError):
            if os.readlink(entry / "fd" / fd).startswith(inside):
                return True
    return False


def session_has(session_dir: str, name: str) -> bool:
    """Whether a live process of the session runs program `name` (its /proc comm)."""
    for pid in session_pids(session_dir):
        with contextlib.suppress(OSError):
            if (PROC / str(pid) / "comm").read_text().strip() == name:
                return True
    return False


def reap(session_dir: str, timeout: float = 10.0) -> list[int]:
    """SIGKILL the session's processes (all listed before any dies, so a raylet cannot
    restart an agent in between), again until none is left or `timeout` runs out; returns
    those still alive then (not ours to kill, or stuck in the kernel)."""
    deadline = time.monotonic() + timeout
    while True:
        pids = session_pids(session_dir)
        for pid in pids:
            with contextlib.suppress(OSError):  # ended meanwhile, or another user's
                os.kill(pid, signal.SIGKILL)
        if not pids or time.monotonic() > deadline:
            return pids
        time.sleep(0.05)  # a killed process leaves /proc's view when the kernel is done
