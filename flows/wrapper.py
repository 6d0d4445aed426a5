"""What runs around one task attempt, wherever it runs (inline, a Ray task, a worker actor).

It sets the `TaskScope`, seeds python/numpy/torch from the task seed, captures stdout/stderr
to `runs/<run_id>/logs/<task_key>.log`, runs the function and returns a plain dict: the JSON
output, the refs the task staged, its checkpoint and, instead of raising, the error. The
driver commits the manifest; nothing here writes to the journal.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import io
import random
import sys
import threading
import time
import traceback
from typing import Any

from alignflow.artifacts import usercode
from alignflow.artifacts.masked_output import LineMasker
from alignflow.artifacts.redact import redact
from alignflow.errors import AlignflowError, FlowError, StoreFileRefused
from alignflow.flows.journal import codec

TRANSIENT = (TimeoutError, ConnectionError)


class _SeedTorchOnImport:
    """Meta-path finder that seeds torch right after a task body first imports it, so a
    worker process never pays torch's import for a task that does not use it."""

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name != "torch":
            return None
        disarm()
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            exec_module, seed = spec.loader.exec_module, self.seed

            def exec_and_seed(module: Any) -> None:
                exec_module(module)
                module.manual_seed(seed)

            spec.loader.exec_module = exec_and_seed  # type: ignore[method-assign]
        return spec


def disarm() -> None:
    """Remove a pending seed-on-import hook (at the end of a task attempt)."""
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _SeedTorchOnImport)]


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch from one task seed. torch is seeded now if imported, else
    the moment the task imports it: either way a task draws the same numbers in every
    process (a fresh one or a reused one, inline or on Ray)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    disarm()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.manual_seed(seed)
    else:
        sys.meta_path.insert(0, _SeedTorchOnImport(seed))


def error_kind(exc: BaseException) -> str:
    """"system" for faults a retry can fix (timeouts, connections, system store errors)."""
    if isinstance(exc, AlignflowError):
        return exc.kind
    return "system" if isinstance(exc, TRANSIENT) else "user"


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an error's text ('' when it has none)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else ""


def error_record(exc: BaseException) -> dict:
    """The error a task attempt hands back instead of raising (texts redacted)."""
    if isinstance(exc, SystemExit):
        message = f"the task called sys.exit({exc.code!r}) (exit code {exit_code(exc)})"
    else:
        message = first_line(exc)
    return {"type": type(exc).__name__, "message": redact(message),
            "kind": error_kind(exc), "traceback": redact(traceback.format_exc())}


def exit_code(exc: SystemExit) -> int:
    """The process exit status `sys.exit(code)` would give (None -> 0, a message -> 1)."""
    if exc.code is None:
        return 0
    return exc.code if isinstance(exc.code, int) else 1


class _Tee(io.TextIOBase):
    """A task's stdout or stderr: its prints (and those of the user code it calls: agents,
    reward functions) reach the terminal and its log masked, a whole line at a time, so a
    secret written in pieces is masked too (`artifacts/masked_output.py`)."""

    def __init__(self, *streams: Any) -> None:
        self.streams = streams
        self._masker = LineMasker()
        self._lock = threading.Lock()  # an agent's environment prints from its own thread

    def write(self, s: str) -> int:
        with self._lock:
            self._send(self._masker.feed(s))
        return len(s)

    def finish(self) -> None:
        """Write the unfinished last line (the attempt is over)."""
        with self._lock:
            self._send(self._masker.finish())

    def _send(self, shown: str) -> None:
        for stream in self.streams if shown else ():
            with contextlib.suppress(Exception):
                stream.write(shown)

    def flush(self) -> None:
        for stream in self.streams:
            with contextlib.suppress(Exception):
                stream.flush()


def _ref_json(ref: Any) -> dict:
    if dataclasses.is_dataclass(ref) and not isinstance(ref, type):
        return dataclasses.asdict(ref)
    return ref.to_json() if hasattr(ref, "to_json") else dict(ref)


def _checkpoint_of(result: Any, scope: Any) -> str | None:
    """A task's checkpoint: a `checkpoint` field/key of its output, or one set on the scope."""
    found = result.get("checkpoint") if isinstance(result, dict) else getattr(result, "checkpoint", None)
    found = found or getattr(scope, "checkpoint", None)
    return found if isinstance(found, str) else None


def execute(call: dict, obj: Any = None) -> dict:
    """Run one attempt of `call` (see `Driver._call_payload`); never raises for task errors."""
    from alignflow.artifacts.scope import TaskScope, use_scope

    if "code" in call:
        usercode.grant(call["code"])  # what the driver allows: its process's, never a store's
    scope = TaskScope(store=call["store"], run_id=call["run_id"], task_key=call["task_key"],
                      seed=call["seed"], attempt=call["attempt"], rank=call.get("rank", 0),
                      world_size=call.get("world_size", 1))
    seed_everything(call["seed"])
    args = ((obj,) if call.get("worker") else ()) + tuple(call["args"])
    log = io.StringIO()
    result, error, started = None, None, time.time()
    tee_out, tee_err = _Tee(log, sys.stdout), _Tee(log, sys.stderr)
    try:
        with use_scope(scope), contextlib.redirect_stdout(tee_out), contextlib.redirect_stderr(tee_err):
            result = call["fn"](*args, **call["kwargs"])
        output = codec.encode(result)
    except (Exception, SystemExit) as exc:  # sys.exit in a task fails the task, not the process
        output, error = None, error_record(exc)
    finally:
        disarm()
        tee_out.finish()
        tee_err.finish()
    ended = time.time()
    if scope.is_lead or error is not None:
        _write_log(call, log.getvalue(), error)
    staged = [_ref_json(r) for r in getattr(scope, "staged", None) or []]
    token = None
    if scope.pending and error is None:
        if call.get("worker") and scope.is_lead:  # the worker lives on: the driver asks later
            token = f"{call['run_id']}:{call['task_key']}:{call['attempt']}"
            _PENDING[token] = list(scope.pending)
        else:  # a plain task's process may not outlive it; a follower is not asked: wait here
            staged += _settle(scope.pending)
    return {"output": output, "artifacts": staged, "durable": token,
            "checkpoint": _checkpoint_of(result, scope), "error": error,
            "started": started, "ended": ended}


_PENDING: dict[str, list] = {}  # token -> futures of background work of finished tasks


def _settle(futures: list) -> list[dict]:
    refs: list[dict] = []
    for future in futures:
        refs += [_ref_json(r) for r in future.result() or []]
    return refs


def settled(token: str) -> bool:
    """Whether `durable(token)` would return without waiting."""
    return all(f.done() for f in _PENDING.get(token, ()))


def durable(token: str) -> dict:
    """Wait for the background work (`TaskScope.defer`) of a finished task; returns the
    artifacts it wrote and when it was done. Raises the work's error."""
    futures = _PENDING.pop(token, None)
    if futures is None:
        raise FlowError(f"the background work of task attempt {token!r} is gone (its worker "
                        "restarted?); the task must run again")
    return {"artifacts": _settle(futures), "settled": time.time()}


def _write_log(call: dict, text: str, error: dict | None) -> None:
    """Append this attempt's output to the task log (skipped when there is nothing to say)."""
    if error is not None:
        text += error["traceback"]
    if not text:
        return
    rank = f".rank{call['rank']}" if call.get("rank") else ""  # a follower's own failure
    store, rel = call["store"], f"runs/{call['run_id']}/logs/{call['task_key']}{rank}.log"
    header = f"--- attempt {call['attempt']} ---\n"
    try:
        old = store.read_bytes(rel).decode() if call["attempt"] > 1 and store.exists(rel) else ""
        store.write_bytes(rel, (old + header + (redact(text) or "")).encode())
    except StoreFileRefused as exc:  # a link in the store is never written through: say so
        print(f"warning: task log not written: {exc}", file=sys.stderr)
    except Exception:  # a log is never worth failing the task for
        pass
