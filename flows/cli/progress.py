"""Progress of a flow run for the person watching it: a live `rich` panel in a terminal, one
plain line per finished task otherwise (CI logs, `nohup`, Ray job logs), e.g.

    [run abc] iter 3/10 learn done in 4.2s (elapsed 1m02s, eta 2m10s)

Iterations are 0-based indices (as in task keys `iter-0003/learn`) and are shown 1-based.
The ETA is the mean wall time of iterations that ran at least one task (replayed, cached
iterations of a resumed run would make it far too hopeful) times what is left.
"""

from __future__ import annotations

import re
import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

_ITER_KEY = re.compile(r"(?:^|/)iter-(\d+)(?:/|$)")
_ROUND_KEY = re.compile(r"(?:^|/)round-(\d+)(?:/|$)")


def format_duration(seconds: float) -> str:
    """`42s`, `1m02s`, `1h02m03s`: short, fixed-width enough to scan in a log."""
    total = max(0, round(seconds))
    hours, rest = divmod(total, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{secs:02d}s"
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def _task_seconds(seconds: float) -> str:
    return f"{seconds:.1f}s" if seconds < 60 else format_duration(seconds)


def iteration_of(task_key: str) -> int | None:
    """The loop index a task key names (`iter-0003/learn` or `round-0003/train` -> 3)."""
    match = _ITER_KEY.search(task_key) or _ROUND_KEY.search(task_key)
    return int(match.group(1)) if match else None


def gpu_note(output: Any) -> str:
    """`, gpu 3.1 GiB` from a step record's `gpu/<role>/peak_allocated_gib` metrics."""
    if isinstance(output, dict) and isinstance(output.get("fields"), dict):
        output = output["fields"]
    metrics = output.get("metrics") if isinstance(output, dict) else None
    if not isinstance(metrics, dict):
        return ""
    peaks = [v for k, v in metrics.items() if k.startswith("gpu/") and k.endswith("_gib")
             and isinstance(v, int | float)]
    return f", gpu {max(peaks):.1f} GiB" if peaks else ""


class Progress:
    """Progress of one flow run; `live=None` means "live if `stream` is a terminal"."""

    def __init__(self, *, stream: TextIO | None = None, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, resume: str | None = None) -> None:
        """`resume`: the command that continues the run when it stops (default
        `alignflow resume RUN`; a campaign's is `alignflow campaign tick CONFIG`)."""
        self.stream = stream if stream is not None else sys.stdout
        self.resume = resume
        self.live = self.stream.isatty() if live is None else live
        self.clock = clock
        self.run_id, self.flow, self.total = "", "", None
        self.started = 0.0
        self.iteration: int | None = None
        self.iter_started = 0.0
        self.iter_ran = False  # did the current iteration run (not replay) any task?
        self.iter_times: list[float] = []
        self.current = ""
        self.counts = {"done": 0, "cached": 0, "failed": 0}
        self._live: Any = None
        self._closed = False

    # ------------------------------------------------------------------ events
    def start_run(self, run_id: str, flow: str, total_iterations: int | None = None) -> None:
        self.run_id, self.flow, self.total = run_id, flow, total_iterations
        self.started = self.iter_started = self.clock()
        of = f", {total_iterations} iterations" if total_iterations else ""
        if self.live:
            self._start_live()
        self._emit(f"start flow {flow}{of}")

    def task_started(self, task_key: str, iteration: int | None = None) -> None:
        """Mark `task_key` as running; `iteration` defaults to the key's `iter-NNNN` part."""
        self._enter_iteration(iteration_of(task_key) if iteration is None else iteration)
        self.current = task_key.rsplit("/", 1)[-1]
        self._refresh()

    def task_finished(self, task_key: str, duration: float, cached: bool = False, *,
                      status: str = "SUCCESSFUL", output: Any = None) -> None:
        """Record a finished task; `cached` means replayed from its manifest, not run.
        `output` (the task's JSON record) may carry its GPU peak memory, shown too."""
        self._enter_iteration(iteration_of(task_key))
        self.iter_ran = self.iter_ran or not cached
        name = task_key.rsplit("/", 1)[-1]
        if cached:
            what, kind = "cached", "cached"
        elif status == "SUCCESSFUL":
            what, kind = f"done in {_task_seconds(duration)}{gpu_note(output)}", "done"
        else:
            what, kind = f"{status.lower()} after {_task_seconds(duration)}", "failed"
        self.counts[kind] += 1
        self.current = ""
        self._emit(f"{self._iter_label()}{name} {what} ({self._times()})")

    def log(self, msg: str) -> None:
        self._emit(msg)

    def close(self, status: str | None = None) -> None:
        """Print the summary line for the run's `status` (SUCCESSFUL, FAILED, RESUMABLE,
        SLEEPING, CANCELED; None: unknown) and stop the live display (safe to call twice).
        Only a SUCCESSFUL run is reported as finished."""
        if self.iteration is not None:
            self._end_iteration()
            self.iteration = None
        if not self._closed:
            self._closed = True
            if self.run_id:  # no summary for a run that never started (e.g. Ray unreachable)
                self._emit(self.summary(status))
        if self._live is not None:
            self._live.stop()
            self._live = None

    def summary(self, status: str | None) -> str:
        c = self.counts
        tasks = c["done"] + c["cached"] + c["failed"]
        took = format_duration(self.clock() - self.started)
        what = (f"{len(self.iter_times)} timed iterations, {tasks} tasks ({c['cached']} cached, "
                f"{c['failed']} failed) in {took}")
        again = self.resume or f"alignflow resume {self.run_id}"
        resume = f"; continue with `{again}`"
        return {
            "SUCCESSFUL": f"finished flow {self.flow}: {what}",
            "FAILED": f"FAILED flow {self.flow}: {what}; fix the error, then `{again}`",
            "RESUMABLE": f"interrupted flow {self.flow}: {what}{resume}",
            "SLEEPING": f"paused flow {self.flow} (sleeping or waiting for an event): {what}",
            "CANCELED": f"stopped flow {self.flow} (canceled, or another driver took over): "
                        f"{what}",
        }.get(status or "", f"ended flow {self.flow} without a recorded outcome: {what}{resume}")

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, exc_type: Any, *exc: object) -> None:
        self.close(None if exc_type is not None else "SUCCESSFUL")

    # ------------------------------------------------------------------ timing
    def _enter_iteration(self, iteration: int | None) -> None:
        if iteration is None or iteration == self.iteration:
            return
        if self.iteration is not None:
            self._end_iteration()
        self.iteration, self.iter_started, self.iter_ran = iteration, self.clock(), False

    def _end_iteration(self) -> None:
        if self.iter_ran:
            self.iter_times.append(self.clock() - self.iter_started)

    def eta(self) -> float | None:
        """Seconds left: mean iteration time × iterations left, minus the current's progress."""
        if not self.total or not self.iter_times or self.iteration is None:
            return None
        mean = sum(self.iter_times) / len(self.iter_times)
        spent = self.clock() - self.iter_started if self.iter_ran else 0.0
        return max(0.0, mean * (self.total - self.iteration) - spent)

    def _iter_label(self) -> str:
        if self.iteration is None:
            return ""
        of = f"/{self.total}" if self.total else ""
        return f"iter {self.iteration + 1}{of} "

    def _times(self) -> str:
        eta = self.eta()
        text = f"elapsed {format_duration(self.clock() - self.started)}"
        return text + (f", eta {format_duration(eta)}" if eta is not None else "")

    # ------------------------------------------------------------------ output
    def status_line(self) -> str:
        """What the live panel shows: flow, iteration, current task, elapsed, ETA."""
        task = f"running {self.current} " if self.current else ""
        return f"[run {self.run_id}] {self.flow} {self._iter_label()}{task}({self._times()})"

    def _emit(self, msg: str) -> None:
        line = f"[run {self.run_id}] {msg}"
        if self._live is not None:
            self._live.console.print(line, markup=False, highlight=False)
            self._refresh()
        else:
            print(line, file=self.stream, flush=True)

    def _start_live(self) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.text import Text

        console = Console(file=self.stream, force_terminal=True)
        self._live = Live(get_renderable=lambda: Text(self.status_line()), console=console,
                          refresh_per_second=4, transient=True)
        self._live.start()

    def _refresh(self) -> None:
        if self._live is not None:
            self._live.refresh()
