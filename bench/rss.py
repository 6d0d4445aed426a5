"""Run a command and report the peak RSS of its whole process tree (Ray actors included).

    .venv/bin/python bench/rss.py -- .venv/bin/alignflow demo

`/usr/bin/time` reports only the driver; a flow's models live in Ray worker processes, so
the budget (main job < 8 GB) is checked on the sum over the driver and its descendants.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
import time

import psutil


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def main(argv: list[str]) -> int:
    cmd = argv[argv.index("--") + 1:] if "--" in argv else argv
    start = time.time()
    child = subprocess.Popen(cmd)
    proc, peak = psutil.Process(child.pid), 0
    while child.poll() is None:
        peak = max(peak, tree_rss(proc))
        time.sleep(0.25)
    print(f"rss.py: exit {child.returncode}, wall {time.time() - start:.0f}s, "
          f"peak tree RSS {peak / 2**30:.2f} GiB", file=sys.stderr)
    return child.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
