"""`alignflow logs -f RUN`: the driver's progress lines, read from the store (so from any
machine that sees it, `flows/journal/progress_log.py`), then followed until the run's driver is
gone; and what `status` says of the tasks running now."""

from __future__ import annotations

import sys
import time
from typing import Any

from alignflow.artifacts.store import Store
from alignflow.flows.cli.progress import beat_note, format_duration
from alignflow.flows.journal import runs
from alignflow.flows.journal.progress_log import read_now, segments

POLL_S = 1.0


def follow(store: Store, run_id: str, *, poll_s: float = POLL_S, out: Any = None) -> int:
    """Print the run's progress so far, then each new line, until the run stops running."""
    out = out or sys.stdout
    runs.read_run(store, run_id)  # RunNotFound, one line
    shown: dict[str, int] = {}  # segment -> characters printed
    while True:
        live = runs.effective_status(store, runs.read_run(store, run_id)) == runs.RUNNING
        _print_new(store, run_id, shown, out)
        if not live:
            return 0
        time.sleep(poll_s)


def _print_new(store: Store, run_id: str, shown: dict[str, int], out: Any) -> None:
    for seg in segments(store, run_id):
        try:
            text = store.read_bytes(seg).decode(errors="replace")
        except FileNotFoundError:  # rotated away meanwhile
            continue
        done = text[:text.rfind("\n") + 1]  # whole lines only
        if len(done) > shown.get(seg, 0):
            out.write(done[shown.get(seg, 0):])
            out.flush()
            shown[seg] = len(done)


def running_now(store: Store, run_id: str) -> list[str]:
    """`iter-0003/learn running 42s: 2/4 optimizer steps`, one per task running now."""
    now = read_now(store, run_id)
    lines = []
    for key, info in sorted((now.get("running") or {}).items()):
        started = info.get("started") if isinstance(info, dict) else None
        took = f" {format_duration(time.time() - started)}" if isinstance(started, int | float) \
            else ""
        lines.append(f"{key} running{took}{beat_note(info.get('beat'))}")
    return lines
