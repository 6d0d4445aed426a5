"""TensorBoard event files written while the run runs, one folder per run (`<dir>/<run id>`).

A resumed run appends to the same folder on the same step axis. Before writing, the
writer reads which (tag, step) points the folder already holds, so a point logged just
before a driver was killed is not written twice.
"""

from __future__ import annotations

import time
from pathlib import Path

from alignflow.flows.tracking.points import Samples, Scalar


def _markdown(s: Samples) -> str:
    def cell(v: object) -> str:
        text = f"{v:.4g}" if isinstance(v, float) else str(v)
        return text.replace("|", "\\|").replace("\n", " ")
    head = "| " + " | ".join(s.columns) + " |\n|" + "---|" * len(s.columns) + "\n"
    body = "".join("| " + " | ".join(cell(v) for v in row) + " |\n" for row in s.rows)
    return f"{head}{body}\nAll rollouts of this iteration: `alignflow sql \"{s.sql}\"`"


class TensorBoardWriter:
    """Scalars and sample tables (text plugin) into `folder`, each (tag, step) once."""

    def __init__(self, folder: str | Path) -> None:
        from tensorboard.summary.writer.event_file_writer import EventFileWriter

        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.seen = logged_points(self.folder)
        self.writer = EventFileWriter(str(self.folder))

    def _add(self, step: int, summary) -> None:
        from tensorboard.compat.proto import event_pb2

        self.writer.add_event(event_pb2.Event(wall_time=time.time(), step=step, summary=summary))

    def write(self, scalars: list[Scalar], samples: list[Samples]) -> None:
        from tensorboard.compat.proto import summary_pb2
        from tensorboard.plugins.text.summary_v2 import text_pb

        for s in scalars:
            if (s.key, s.step) not in self.seen:
                self._add(s.step, summary_pb2.Summary(value=[
                    summary_pb2.Summary.Value(tag=s.key, simple_value=s.value)]))
                self.seen.add((s.key, s.step))
        for t in samples:
            if (t.key, t.step) not in self.seen:
                self._add(t.step, text_pb(t.key, _markdown(t)))
                self.seen.add((t.key, t.step))
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def logged_points(folder: Path) -> set[tuple[str, int]]:
    """(tag, step) of every event already in the folder's event files."""
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader

    seen: set[tuple[str, int]] = set()
    for path in sorted(folder.glob("events.out.tfevents.*")):
        for event in EventFileLoader(str(path)).Load():
            seen.update((v.tag, event.step) for v in event.summary.value)
    return seen
