"""A user's reward function runs in a child process of its own, with a time budget per call.

A `reward_func` that never returns, crashes the interpreter or calls `os._exit` would
otherwise take the whole driver down with it (and with it `resume --all` and `tick`, which
drive many runs in one process). In a child, a call past its budget is abandoned and the
child killed, and a child that dies is named: either way the run fails with one line and
the process driving it goes on. The child imports the file only through the gated loader
(`artifacts/usercode.py`), with the one allowance its parent holds for that file, and
starts once per file, forked from a clean server process (`_context`).
"""

from __future__ import annotations

import multiprocessing as mp
import random
import time
from multiprocessing.connection import wait
from pathlib import Path
from typing import Any

from alignflow.artifacts import usercode
from alignflow.artifacts.masked_output import ChildOutput, serve
from alignflow.artifacts.redact import redact
from alignflow.errors import ConfigError


class RewardFuncError(ConfigError):
    """The user's reward function hung, died or raised (one line, naming the file)."""


def _context() -> mp.context.BaseContext:
    """Children fork from a small server process that has imported only the loader: no
    threads, locks or CUDA state of this process, and ~0.1 s per child instead of a spawn's
    fresh interpreter."""
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["alignflow.artifacts.usercode",
                                "alignflow.artifacts.masked_output"])
    return ctx


class ChildFunc:
    """`reward_func` of one allowed file, called in a child process with a time budget."""

    def __init__(self, path: Path, func_name: str, timeout: float) -> None:
        self.path, self.func_name, self.timeout = path, func_name, timeout
        self.where = f"{func_name} in {path}"
        self._proc: Any = None
        self._conn: Any = None
        self._output: ChildOutput | None = None

    def start(self) -> None:
        """Start the child and wait for it to load the file (import errors are raised here)."""
        usercode.read_allowed(self.path, "reward function file")  # refuse before spawning
        allowed = usercode.Allowances({usercode.resolved(self.path):
                                       usercode.current().files[usercode.resolved(self.path)]})
        ctx = _context()
        parent, child = ctx.Pipe()
        self._output = ChildOutput(ctx)
        self._proc = ctx.Process(target=serve, daemon=True, name="alignflow-reward-func",
                                 args=(*self._output.ends, child, str(self.path),
                                       self.func_name, allowed))
        self._proc.start()
        child.close()
        self._output.started()
        self._conn = parent
        kind, *rest = self._answer(max(self.timeout, 60.0), "loading the file")
        if kind == "error":
            self.close()
            raise ConfigError(f"importing reward function file {self.path} failed: "
                              f"{redact(rest[0])}")
        if not rest[0]:
            self.close()
            raise ConfigError(f"reward function file {self.path} defines no function "
                              f"{self.func_name!r}; expected def {self.func_name}(queries, "
                              "prompts, labels)")

    def __call__(self, *args: Any) -> Any:
        if self._proc is None or not self._proc.is_alive():
            self.start()
        self._conn.send((random.getrandbits(32), args))
        kind, *rest = self._answer(self.timeout, "scoring")
        if kind == "error":
            raise RewardFuncError(f"{self.where} raised {redact(rest[0])}")
        return rest[0]

    def _answer(self, timeout: float, doing: str) -> tuple:
        """The child's reply, or one line when it hangs past `timeout` or dies; what it
        prints meanwhile is relayed, masked, as it comes."""
        deadline = time.monotonic() + timeout
        try:
            while (left := deadline - time.monotonic()) > 0:
                ready = wait([self._conn, *self._output.readers], left)
                self._output.relay(ready)
                if self._conn in ready:
                    reply = self._conn.recv()
                    self._output.drain()  # the call's prints, before its result
                    return reply
        except (EOFError, OSError):
            self._proc.join(timeout=2)  # it died: let it be reaped, for its exit code
        code = self._proc.exitcode
        self.close()
        if code is None:
            raise RewardFuncError(f"{self.where} did not return within {timeout:g} s "
                                  f"({doing}); its process was stopped (reward.func_timeout)")
        raise RewardFuncError(f"{self.where}: its process exited with code {code} while "
                              f"{doing} (os._exit, a crash or a signal in the reward function)")

    def close(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            self._proc.kill()
            self._proc.join(timeout=5)
        if self._conn is not None:
            self._conn.close()
        if self._output is not None:
            self._output.close()  # what it said last (a traceback of its crash, say)
        self._proc = self._conn = self._output = None
