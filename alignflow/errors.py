"""One error hierarchy for alignflow.

It lives in `artifacts` because that package may import nothing of ours; `alignflow.errors`
re-exports it. Each error says what went wrong, where (path, key or flag) and what was
expected, in one line. `kind` tells the flow engine whether retrying could help.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal

Kind = Literal["user", "system"]


class AlignflowError(Exception):
    """Base class. `kind="user"`: bad input or code, not retried; `"system"`: retried."""

    kind: Kind = "user"


class ConfigError(AlignflowError, ValueError):
    """A flag, config key, value or config file is wrong."""

    field: str = ""  # the dotted config key, when one key is at fault (`invalid`)
    detail: str = ""  # what is wrong with it, without the key


class SchemaError(AlignflowError, ValueError):
    """Data in the store does not match what alignflow expects (version, fields, Parquet)."""


class StoreFileRefused(SchemaError):
    """A store path that is not what a store holds, refused before it is used: a symbolic
    link below the root (never followed, to read or to write), a FIFO, device or socket, a
    file past its size limit, JSON nested past the depth limit, or a file that disagrees
    with its manifest. The rest of the store is still served."""


class StoreError(AlignflowError, OSError):
    """The store cannot be reached or used (endpoint, credentials, bucket)."""

    kind: Kind = "system"


class CommitConflict(AlignflowError, FileExistsError):
    """A manifest was committed twice; the second commit is refused."""


class SqlRefused(AlignflowError, PermissionError):
    """A SQL statement would write, attach, copy out, install or load something."""


class QueryLimit(AlignflowError, RuntimeError):
    """A SQL query ran past its time or memory limit and was stopped."""


class FlowError(AlignflowError, RuntimeError):
    """A flow cannot be run, resumed or found as asked."""


class RunNotFound(FlowError, LookupError):
    """No run with this id exists in the store."""


class LeaseHeld(FlowError):
    """Another driver holds this run's lease."""


class EngineError(AlignflowError, RuntimeError):
    """A generation engine failed, hung or died; retrying on a fresh engine may help."""

    kind: Kind = "system"


class TaskFailed(FlowError):
    """A task raised in user code; the run is FAILED and resumable after a fix."""

    def __init__(self, task_key: str, error: str, *, kind: Kind = "user",
                 fault: str = "") -> None:
        super().__init__(f"task {task_key!r} failed: {error}")
        self.task_key = task_key
        self.error = error
        self.kind = kind
        self.fault = fault  # the exception type behind a system failure (control/recovery.py)


def invalid(field: str, message: str) -> ConfigError:
    """A bad value found by a config class's own check. The config loader prefixes `field`
    with its section's dotted path: `config key 'actor.adam.lr': expected ..., got 0.0`."""
    err = ConfigError(f"config key {field!r}: {message}")
    err.field, err.detail = field, message
    return err


class ConfigProblems(ConfigError):
    """Several config problems found in one pass; `problems` holds one error per line."""

    def __init__(self, problems: list[ConfigError]) -> None:
        self.problems = list(problems)
        lines = [str(p) for p in self.problems]
        head = f"{len(lines)} problems in the config:\n" if len(lines) > 1 else ""
        super().__init__(head + "\n".join(f"  {line}" if head else line for line in lines))


_FOUND: ContextVar[list[ConfigError] | None] = ContextVar("alignflow_config_problems",
                                                          default=None)


@contextmanager
def collecting() -> Iterator[list[ConfigError]]:
    """Inside, `report` (and `require`) record problems in the yielded list instead of
    raising, so a config is checked whole and every problem is reported at once."""
    found: list[ConfigError] = []
    token = _FOUND.set(found)
    try:
        yield found
    finally:
        _FOUND.reset(token)


def report(err: ConfigError) -> None:
    """Raise `err`, or record it while `collecting()`."""
    found = _FOUND.get()
    if found is None:
        raise err
    found.append(err)


def require(ok: bool, field: str, expected: str, value: object) -> None:
    """`invalid(field, "expected <expected>, got <value>")` unless `ok`."""
    if not ok:
        report(invalid(field, f"expected {expected}, got {value!r}"))
