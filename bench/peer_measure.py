"""Whole-process measurements of one command: wall time, time to its first output line,
CPU seconds and peak memory of its whole process tree (Ray's processes included).

The benchmark process makes itself a child subreaper, so processes a command leaves
behind (daemons, Ray workers whose parent exited) stay its descendants: they are sampled
while alive and their CPU time is counted when reaped (`RUSAGE_CHILDREN`).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import resource
import subprocess
import threading
import time

import psutil

PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


class TreeSampler(threading.Thread):
    """Samples RSS of every descendant of this process every `period` seconds."""

    def __init__(self, period: float = 0.1) -> None:
        super().__init__(daemon=True)
        self.period, self.stop = period, threading.Event()
        self.peak_total = 0  # peak of the summed RSS of all live descendants
        self.peaks: dict[int, int] = {}  # pid -> its peak RSS
        self.most = 0  # most processes alive at once

    def run(self) -> None:
        me = psutil.Process()
        while not self.stop.is_set():
            total, alive = 0, 0
            for proc in me.children(recursive=True):
                try:
                    rss = proc.memory_info().rss
                except psutil.Error:
                    continue
                total, alive = total + rss, alive + 1
                self.peaks[proc.pid] = max(self.peaks.get(proc.pid, 0), rss)
            self.peak_total, self.most = max(self.peak_total, total), max(self.most, alive)
            self.stop.wait(self.period)


def _reap_orphans() -> None:
    """Wait for adopted orphans (Ray processes) so their CPU time is counted."""
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            time.sleep(0.05)


def measure(cmd: list[str], env: dict, cwd: str | None = None) -> dict:
    """Run `cmd`; returns wall_s, first_output_s, cpu_s, peak_rss_mib (peak of the tree's
    summed RSS), sum_peak_rss_mib (each process's own peak, summed), processes, rc, tail."""
    become_subreaper()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler = TreeSampler()
    sampler.start()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    first, lines = None, []
    for line in proc.stdout:
        first = first if first is not None else time.perf_counter() - start
        lines.append(line)
    rc = proc.wait()
    wall = time.perf_counter() - start
    _reap_orphans()
    sampler.stop.set()
    sampler.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    mib = 1024 * 1024
    return {"wall_s": wall, "first_output_s": first, "cpu_s": cpu, "rc": rc,
            "peak_rss_mib": sampler.peak_total / mib,
            "sum_peak_rss_mib": sum(sampler.peaks.values()) / mib,
            "processes": sampler.most, "tail": "".join(lines[-20:])}
