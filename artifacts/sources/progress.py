"""A line every few seconds while a large download runs, and one when it is done, so a
node that spends minutes fetching a model says so (`$ALIGNFLOW_FETCH_PROGRESS_S`, 5 s)."""

from __future__ import annotations

import os
import sys
import time

from alignflow.artifacts.redact import redact

MIB = 2**20


def every_seconds() -> float:
    return float(os.environ.get("ALIGNFLOW_FETCH_PROGRESS_S", "5"))


def _size(n: float) -> str:
    if n >= 2**30:
        return f"{n / 2**30:.2f} GiB"
    return f"{n / MIB:.1f} MiB" if n >= MIB else f"{n / 1024:.1f} KiB"


class Progress:
    """Bytes of one fetch: `add` as they arrive, `done` at the end."""

    def __init__(self, source: str, total: int, files: int) -> None:
        self.source, self.total, self.files = redact(source), total, files
        self.got, self.start = 0, time.monotonic()
        self.last, self.every = self.start, every_seconds()

    def add(self, n: int) -> None:
        self.got += n
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            share = f" ({100 * self.got / self.total:.0f}%)" if self.total else ""
            _say(f"fetching {self.source}: {_size(self.got)} of {_size(self.total)}{share}, "
                 f"{self._rate(now)}")

    def _rate(self, now: float) -> str:
        return f"{self.got / MIB / max(now - self.start, 1e-6):.1f} MiB/s"

    def done(self, sha256: str, where: str) -> float:
        """Say it is done; returns the seconds it took."""
        now = time.monotonic()
        _say(f"fetched {self.source}: {_size(self.got)} in {self.files} file(s), "
             f"{now - self.start:.1f}s, {self._rate(now)}; sha256 {sha256[:16]}… → {where}")
        return now - self.start


def _say(line: str) -> None:
    print(f"alignflow: {line}", file=sys.stderr, flush=True)
