"""The allow-list of types a journal may rebuild.

A store is data, never code: a manifest or a run.json names record types as
`module:QualName`, and whoever can write to a shared bucket can write any name there. So
decoding rebuilds only classes registered here — alignflow's own records, and the records
a user's flow module registers with `@journal_record` — and never imports or looks up
anything else. Registration happens when the defining module is imported (the codec
imports alignflow's own record modules, a fixed list, when a name is not yet registered).
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T", bound=type)
_RECORDS: dict[str, type] = {}


def journal_record(cls: T, name: str | None = None) -> T:
    """Allow `cls` (a dataclass or pydantic model) in journals (usable as a decorator)."""
    _RECORDS[name or f"{cls.__module__}:{cls.__qualname__}"] = cls
    return cls


def registered(name: str) -> type | None:
    """The class registered under `module:QualName`, or None."""
    return _RECORDS.get(name)
