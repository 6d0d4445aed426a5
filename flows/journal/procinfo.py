"""Facts about processes on this machine, for telling a dead lease owner from a live one.

A pid alone proves nothing: pids are reused. A process is identified by (boot id, pid,
start time); if the pid is gone, or now belongs to a process started at another time, the
process we knew is gone.
"""

from __future__ import annotations

import functools
import math
import os

import psutil

BOOT_ID_FILE = "/proc/sys/kernel/random/boot_id"
HAS_PROC = os.path.isdir("/proc/self")


@functools.cache
def boot_id() -> str | None:
    """This boot's id (Linux), so a reboot or another machine with our hostname is told apart."""
    try:
        with open(BOOT_ID_FILE) as f:
            return f.read().strip() or None
    except OSError:
        return None


def start_time(pid: int) -> float | None:
    """When process `pid` started (epoch seconds); None if there is no such live process
    (a zombie counts as dead); NaN if it is alive but we may not look (never equal to a
    recorded time, so it is never taken for dead)."""
    try:
        proc = psutil.Process(pid)
        if proc.status() == psutil.STATUS_ZOMBIE:
            return None
        return proc.create_time()
    except psutil.NoSuchProcess:
        return None
    except (psutil.AccessDenied, OSError):
        return math.nan


def own_start_time(pid: int) -> float | None:
    """`start_time` for a record: NaN (unknown) is written as None."""
    started = start_time(pid)
    return None if started is None or math.isnan(started) else started


def start_ticks(pid: int) -> int | None:
    """Clock ticks from boot to the start of process `pid` (`/proc/PID/stat`, Linux): the
    start time that no clock change moves (an epoch start time is boot time + ticks, and
    boot time follows the wall clock, so an NTP step moved a live driver's start by seconds
    and made it look dead). None if there is no such live process (a zombie counts as
    dead) or no /proc."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            fields = f.read().rsplit(b")", 1)[1].split()
    except (FileNotFoundError, ProcessLookupError):
        return None
    return None if fields[0] == b"Z" else int(fields[19])
