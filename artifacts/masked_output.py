"""What user code prints, masked line by line on its way to the terminal and the task log.

`redact` masks a whole text, but output arrives in pieces: `print` writes the value and
then "\\n", and a pipe hands over whatever bytes are ready, so a secret cut between two
pieces would pass unmasked. `LineMasker` masks whole lines only and holds back the
unfinished one until its end arrives or the stream ends (`finish`).

A reward function runs in a child process (`tasks/rewards/sandbox.py`) forked from a fork
server, whose stdout and stderr are those of whichever process started the server: the
child's prints would reach a terminal unmasked, and never the task's log. So the child
writes into two pipes instead (`serve` redirects its file descriptors 1 and 2, which also
catches `os.write` and subprocesses), and `ChildOutput` relays what comes through them,
masked, to this process's `sys.stdout`/`sys.stderr`: the terminal, and while a task runs
its log too (`flows/wrapper.py`).
"""

from __future__ import annotations

import codecs
import contextlib
import io
import os
import sys
from multiprocessing.connection import wait
from typing import Any

from alignflow.artifacts import usercode
from alignflow.artifacts.redact import redact

MAX_PENDING = 1 << 16  # a line this long without an end is masked as it stands
CHUNK = 1 << 16  # bytes read from a pipe at once
MAX_DRAIN_READS = 256  # a child that never stops writing cannot hold a call's end forever
STREAMS = ("stdout", "stderr")


class LineMasker:
    """Text fed in pieces, given back masked a whole line at a time (not thread-safe: the
    caller holds a lock where threads share one)."""

    def __init__(self) -> None:
        self._pending = ""

    def feed(self, text: str) -> str:
        """The masked lines `text` completes ('' while the line goes on)."""
        text = self._pending + text
        cut = max(text.rfind("\n"), text.rfind("\r")) + 1  # "\r": progress bars redraw
        if not cut and len(text) > MAX_PENDING:
            cut = len(text)
        self._pending = text[cut:]
        return redact(text[:cut]) or ""

    def finish(self) -> str:
        """The unfinished line, masked (the stream ended)."""
        text, self._pending = self._pending, ""
        return redact(text) or ""


def _write(name: str, text: str) -> None:
    """Write to this process's `sys.<name>` as it is now (a task's tee while one runs)."""
    stream = getattr(sys, name)
    if text and stream is not None:
        with contextlib.suppress(Exception):  # a closed or odd stream never fails a call
            stream.write(text)
            stream.flush()


class ChildOutput:
    """Pipes for a child's stdout and stderr, relayed masked to this process's."""

    def __init__(self, ctx: Any) -> None:
        pipes = [ctx.Pipe(duplex=False) for _ in STREAMS]
        self.ends = tuple(write for _, write in pipes)  # the child's: `serve(*ends, ...)`
        self._open = {read: (name, LineMasker(), codecs.getincrementaldecoder("utf-8")(
            errors="replace")) for (read, _), name in zip(pipes, STREAMS, strict=True)}

    def started(self) -> None:
        """The child holds its ends now: this process lets go of them (so a dead child's
        pipes read as ended)."""
        for end in self.ends:
            end.close()

    @property
    def readers(self) -> list:
        """The pipes not yet ended, to wait on beside the child's answers."""
        return list(self._open)

    def relay(self, ready: list) -> None:
        """Read each ready pipe once and write its complete lines, masked."""
        for reader in ready:
            if reader not in self._open:
                continue
            name, masker, decoder = self._open[reader]
            data = os.read(reader.fileno(), CHUNK)
            text = masker.feed(decoder.decode(data, final=not data))
            if not data:  # the child and all it started are gone
                text += masker.finish()
                del self._open[reader]
                reader.close()
            _write(name, text)

    def drain(self) -> None:
        """Relay what the child has written so far and end its unfinished lines (a call
        answered, or the child stopped)."""
        for _ in range(MAX_DRAIN_READS):
            ready = wait(self.readers, 0) if self._open else []
            if not ready:
                break
            self.relay(ready)
        for name, masker, _ in self._open.values():
            _write(name, masker.finish())

    def close(self) -> None:
        """Drain, then close this side of the pipes."""
        self.drain()
        for reader in self._open:
            reader.close()
        self._open.clear()


class _FlushingConn:
    """The child's end of its calls: what it printed is in the pipes before each answer."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn

    def send(self, obj: Any) -> None:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):
                stream.flush()
        self.conn.send(obj)

    def recv(self) -> Any:
        return self.conn.recv()


def serve(out: Any, err: Any, conn: Any, path: str, func_name: str,
          allowed: usercode.Allowances) -> None:
    """A reward child's body: file descriptors 1 and 2 into the pipes `out` and `err`
    (line-buffered, so what it prints before a hang still shows), then its calls
    (`usercode.serve_calls`)."""
    for fd, end, stream in ((1, out, sys.stdout), (2, err, sys.stderr)):
        with contextlib.suppress(Exception):
            stream.flush()
        os.dup2(end.fileno(), fd)
        end.close()
        with contextlib.suppress(Exception):
            if isinstance(stream, io.TextIOWrapper):
                stream.reconfigure(line_buffering=True)
    usercode.serve_calls(_FlushingConn(conn), path, func_name, allowed)
