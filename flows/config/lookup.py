"""Reading a built config by key, for the code that serves every family at once (the CLI's
dry run and checks, the compat notes, live logging): the one place outside a config's own
classes that looks a config's values up by name. Everything else reads typed fields."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Any

from alignflow.flows.config.types import key_of


def value_at(config: Any, path: str) -> Any:
    """The value at dotted key `path` of a typed config or a plain dict config; None where
    the config has no such key (a section it lacks, or a leaf on the way)."""
    for key in path.split("."):
        if isinstance(config, dict):
            config = config.get(key)
        elif dataclasses.is_dataclass(config) and not isinstance(config, type):
            config = _field(config, key)
        else:
            return None
    return config


def _field(config: Any, key: str) -> Any:
    names = {key_of(f): f.name for f in dataclasses.fields(config)}
    return getattr(config, names[key]) if key in names else None


def leaves(config: Any, name: str, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """(dotted key, value) of every set field called `name` in a typed config tree."""
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        if f.name == name and value:
            yield prefix + key_of(f), value
        elif dataclasses.is_dataclass(value):
            yield from leaves(value, name, f"{prefix}{key_of(f)}.")
