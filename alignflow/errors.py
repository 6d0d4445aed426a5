"""One error hierarchy for alignflow.

It lives in `artifacts` because that package may import nothing of ours; `alignflow.errors`
re-exports it. Each error says what went wrong, where (path, key or flag) and what was
expected, in one line. `kind` tells the flow engine whether retrying could help.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["user", "system"]


class AlignflowError(Exception):
    """Base class. `kind="user"`: bad input or code, not retried; `"system"`: retried."""

    kind: Kind = "user"


class ConfigError(AlignflowError, ValueError):
    """A flag, config key, value or config file is wrong."""


class SchemaError(AlignflowError, ValueError):
    """Data in the store does not match what alignflow expects (version, fields, Parquet)."""


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

    def __init__(self, task_key: str, error: str, *, kind: Kind = "user") -> None:
        super().__init__(f"task {task_key!r} failed: {error}")
        self.task_key = task_key
        self.error = error
        self.kind = kind


def invalid(field: str, message: str) -> ConfigError:
    """A bad value found by a config class's own check. The config loader prefixes `field`
    with its section's dotted path: `config key 'actor.adam.lr': expected ..., got 0.0`."""
    err = ConfigError(f"config key {field!r}: {message}")
    err.field, err.detail = field, message  # type: ignore[attr-defined]
    return err


def require(ok: bool, field: str, expected: str, value: object) -> None:
    """`invalid(field, "expected <expected>, got <value>")` unless `ok`."""
    if not ok:
        raise invalid(field, f"expected {expected}, got {value!r}")
