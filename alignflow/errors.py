"""Public error types (defined in `alignflow.artifacts.errors`, which imports nothing of ours)."""

from alignflow.artifacts.errors import (
    AlignflowError,
    CommitConflict,
    ConfigError,
    FlowError,
    LeaseHeld,
    RunNotFound,
    SchemaError,
    SqlRefused,
    StoreError,
    TaskFailed,
)

__all__ = [
    "AlignflowError",
    "CommitConflict",
    "ConfigError",
    "FlowError",
    "LeaseHeld",
    "RunNotFound",
    "SchemaError",
    "SqlRefused",
    "StoreError",
    "TaskFailed",
]
