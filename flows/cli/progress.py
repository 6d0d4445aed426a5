"""Progress of a flow run for the person watching it: a live `rich` panel in a terminal, one
plain line per finished task otherwise (CI logs, `--detach`, cron, Ray job logs), e.g.

    [run abc] iter-0003/learn done in 4.2s (4/10 iterations, elapsed 1m02s, eta 2m10s)

Tasks are named by their keys, so the line, `alignflow status`, `--rerun-from` and the
`iteration` column of SQL say the same number (`iter-0003` is iteration 3, the 4th of 10).
While tasks run, a heartbeat (`flows/control/heartbeat.py`) adds a line every few seconds with how
far each task is (`iter-0003/generate running 40s: 24/64 sequences`), so a silence means a
stall, not a long step. Every line also goes to the store (`flows/journal/progress_log.py`), where
`alignflow logs -f RUN` follows it from any machine.

The current iteration is the oldest one with a running task (asynchronous RL generates
the next batches while one learns: those do not move the count, nor make the ETA 0s at the
start), never past the flow's own count. The ETA is the mean time between the iterations'
turns (when each became the current one; replayed iterations of a resumed run would make it
far too hopeful) times what is left; once the loop is over (a task outside any iteration
after the last one) there is none. Inside one long task its beat gives the count and what
is left of it (`: 1,200/1,536 tokens (3/16 sequences), ~40s left`).
"""

from __future__ import annotations

import re
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TextIO

from alignflow.flows.cli.eval_note import eval_note

_ITER_KEY = re.compile(r"(?:^|/)(?:iter|train)-(\d+)(?:/|$)")  # RL; offline chunks
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
    """The loop index a task key names (`iter-0003/learn`, `round-0003/train`, an offline
    chunk's `train-0003` -> 3)."""
    match = _ITER_KEY.search(task_key) or _ROUND_KEY.search(task_key)
    return int(match.group(1)) if match else None


def gpu_note(output: Any) -> str:
    """`, gpu 3.1 GiB` from a step record's `gpu/<role>/peak_allocated_gib` metrics."""
    if isinstance(output, dict) and isinstance(output.get("fields"), dict):
        output = output["fields"]
    metrics = output.get("metrics") if isinstance(output, dict) else None
    if not isinstance(metrics, dict):
        return ""
    peaks = [v for k, v in metrics.items() if "gpu" in k and k.endswith("peak_allocated_gib")
             and isinstance(v, int | float)]  # measured, not the plan's figure
    return f", gpu {max(peaks):.1f} GiB" if peaks else ""


def beat_note(beat: dict | None, elapsed: float | None = None) -> str:
    """`: 24/64 sequences` from a task's last beat (`artifacts/scope.beat`); with the task's
    `elapsed` seconds, what is left of it at its pace so far (`, ~40s left`)."""
    if not beat or not isinstance(beat.get("done"), int | float):
        return ""
    done, total = beat["done"], beat.get("total")
    of = f"/{total:,}" if isinstance(total, int | float) and total else ""
    note = f": {done:,}{of} {beat.get('unit', '')}".rstrip()
    if of and elapsed and 0 < done < total:
        note += f", ~{format_duration(elapsed * (total - done) / done)} left"
    return note


class Progress:
    """Progress of one flow run; `live=None` means "live if `stream` is a terminal"."""

    def __init__(self, *, stream: TextIO | None = None, live: bool | None = None,
                 clock: Callable[[], float] = time.monotonic, resume: str | None = None) -> None:
        """`resume`: the command that continues the run when it stops (default
        `alignflow resume RUN`; a campaign's is `alignflow campaign tick CONFIG`)."""
        self.stream = stream if stream is not None else sys.stdout
        self.live = self.stream.isatty() if live is None else live
        self.clock, self.resume = clock, resume
        self.run_id, self.flow = "", ""
        self.total: int | None = None
        self.started = 0.0
        self.first_seen: dict[int, float] = {}  # iteration -> when its first live task began
        self.turns: dict[int, float] = {}  # iteration -> when it became the current one (live)
        self.current: int | None = None  # the oldest iteration with a running task
        self.loop_over = False  # a task outside the iterations came after the last one
        self.replayed: set[int] = set()  # iterations seen only as replayed tasks
        self.running: dict[str, float] = {}  # task key -> when it started (clock)
        self.beats: dict[str, dict] = {}  # task key -> its last beat
        self.counts = {"done": 0, "cached": 0, "failed": 0}
        self._iterations: dict[str, int | None] = {}  # running task key -> its iteration
        self.sink: Any = None  # the store's progress log (`flows/journal/progress_log.py`)
        self._lock = threading.Lock()
        self._live: Any = None
        self._closed = False

    # ------------------------------------------------------------------ events
    def start_run(self, run_id: str, flow: str, total_iterations: int | None = None,
                  sink: Any = None) -> None:
        self.run_id, self.flow, self.total, self.sink = run_id, flow, total_iterations, sink
        self.started = self.clock()
        if self.live:
            self._start_live()
        self._emit(f"start flow {flow}" + (f", {self.total} iterations" if self.total else ""))

    def expect(self, iterations: int) -> None:
        """The flow's own count of iterations (known once its data is loaded)."""
        if iterations != self.total:
            self.total = iterations
            self._emit(f"{iterations} iterations")

    def task_started(self, task_key: str, iteration: int | None = None) -> None:
        """Mark `task_key` as running; `iteration` defaults to the key's `iter-NNNN` part."""
        it = iteration_of(task_key) if iteration is None else iteration
        self._seen(it, live=True)
        self.running[task_key] = self.clock()
        self._iterations[task_key] = it
        self._advance(it)
        self._refresh()

    def task_finished(self, task_key: str, duration: float, cached: bool = False, *,
                      status: str = "SUCCESSFUL", output: Any = None) -> None:
        """Record a finished task; `cached` means replayed from its manifest, not run.
        `output` (the task's JSON record) may carry its GPU peak memory, shown too."""
        it = self._iterations.pop(task_key, iteration_of(task_key))
        self._seen(it, live=not cached)
        self.running.pop(task_key, None)
        self._advance(it, live=not cached)
        self.beats.pop(task_key, None)
        if cached:
            what, kind = "cached", "cached"
        elif status == "SUCCESSFUL":
            what, kind = (f"done in {_task_seconds(duration)}{gpu_note(output)}"
                          f"{eval_note(output)}", "done")
        else:
            what, kind = f"{status.lower()} after {_task_seconds(duration)}", "failed"
        self.counts[kind] += 1
        self._emit(f"{task_key} {what} ({self._times()})")

    def heartbeat(self, beats: dict[str, dict]) -> None:
        """Say how long each running task has run and how far it is (its last beat)."""
        self.beats.update(beats)
        if self._live is not None:
            self._refresh()
            return
        for key, since in sorted(self.running.items(), key=lambda kv: kv[1]):
            took = self.clock() - since
            self._emit(f"{key} running {format_duration(took)}"
                       f"{beat_note(self.beats.get(key), took)} ({self._times()})")

    def log(self, msg: str) -> None:
        self._emit(msg)

    def close(self, status: str | None = None) -> None:
        """Print the summary line for the run's `status` (SUCCESSFUL, FAILED, RESUMABLE,
        SLEEPING, CANCELED; None: unknown) and stop the live display (safe to call twice).
        Only a SUCCESSFUL run is reported as finished."""
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
        replayed = self.replayed - set(self.first_seen)
        seen = len(self.first_seen) + len(replayed)
        iterations = f"{seen} iterations ({len(replayed)} replayed), " \
            if seen or self.total else ""
        what = f"{iterations}{tasks} tasks ({c['cached']} cached, {c['failed']} failed) in {took}"
        again = self.resume or f"alignflow resume {self.run_id}"
        resume = f"; continue with `{again}`"
        return {
            "SUCCESSFUL": f"finished flow {self.flow}: {what}",
            "FAILED": f"FAILED flow {self.flow}: {what}; fix the error, then `{again}` "
                      f"(a config value: `{again} --set KEY=VALUE`)",
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
    def _seen(self, iteration: int | None, *, live: bool) -> None:
        if iteration is None:
            return
        if live:
            self.first_seen.setdefault(iteration, self.clock())
        else:
            self.replayed.add(iteration)

    def _counted(self, it: int) -> bool:
        """An iteration of the loop: not past the flow's own count (a campaign round's run,
        a task after the last iteration)."""
        return self.total is None or it < self.total

    def _advance(self, it: int | None, *, live: bool = True) -> None:
        """At a task's start, move the current iteration to the oldest one running; at a
        finish with nothing running, to the task's (never back). A task outside the
        iterations after the last one ends the loop."""
        if it is None:
            self.loop_over |= bool(self.total) and self.current == (self.total or 0) - 1
            return
        if not self._counted(it):
            return
        running = [i for i in self._iterations.values() if i is not None and self._counted(i)]
        if running and it not in running:  # a finished task: the oldest running one stays
            return
        oldest = min(running) if running else it
        if self.current is None or oldest > self.current:
            self.current = oldest
            if live:
                self.turns.setdefault(oldest, self.clock())

    @property
    def iteration(self) -> int | None:
        """The current iteration (see the module's docstring)."""
        return self.current

    def eta(self) -> float | None:
        """Seconds left: the mean time between the iterations' turns × iterations left,
        minus what the current one has run; None before two turns and after the loop."""
        if not self.total or len(self.turns) < 2 or self.loop_over or self.current is None:
            return None
        turns = sorted(self.turns.items())
        mean = (turns[-1][1] - turns[0][1]) / (turns[-1][0] - turns[0][0])
        spent = self.clock() - self.turns.get(self.current, turns[-1][1])
        return max(0.0, mean * (self.total - self.current) - spent)

    def _times(self) -> str:
        eta, it = self.eta(), self.iteration
        of = f"{it + 1}/{self.total} iterations, " if it is not None and self.total else ""
        text = f"{of}elapsed {format_duration(self.clock() - self.started)}"
        return text + (f", eta {format_duration(eta)}" if eta is not None else "")

    # ------------------------------------------------------------------ output
    def status_line(self) -> str:
        """What the live panel shows: flow, the running task (how long, how far), elapsed,
        ETA."""
        task = ""
        if self.running:
            key, since = min(self.running.items(), key=lambda kv: kv[1])
            took = self.clock() - since
            task = (f"{key} running {format_duration(took)}"
                    f"{beat_note(self.beats.get(key), took)} ")
        return f"[run {self.run_id}] {self.flow} {task}({self._times()})"

    def _emit(self, msg: str) -> None:
        line = f"[run {self.run_id}] {msg}"
        with self._lock:
            if self._live is not None:
                self._live.console.print(line, markup=False, highlight=False)
                self._refresh()
            else:
                print(line, file=self.stream, flush=True)
            if self.sink is not None:
                self.sink.write(line)

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
