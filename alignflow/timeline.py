"""Phase marks for benchmarks: where a command's seconds go, per process.

`mark("ray ready")` appends one JSON line `{"t": epoch seconds, "pid", "event"}` to the file
named by `$ALIGNFLOW_TIMELINE` (inherited by Ray's workers); without it, nothing happens
and nothing is imported. `bench/breakdown.py` reads the file beside the process tree's RSS
samples and the run's manifests.
"""

from __future__ import annotations

import json
import os
import time


def mark(event: str) -> None:
    """Note that `event` happened now in this process (a no-op unless benchmarking)."""
    path = os.environ.get("ALIGNFLOW_TIMELINE")
    if not path:
        return
    line = json.dumps({"t": time.time(), "pid": os.getpid(), "event": event}) + "\n"
    try:
        with open(path, "a") as fh:  # one short append: lines of processes never interleave
            fh.write(line)
    except OSError:
        pass
