"""Building a frozen config tree from overrides, and turning it back into plain data.

`load_config(cls, config_file=, sets=, flags=)` applies the sources in order (defaults <
YAML < `--set` < flags), parses each value by its annotation and runs each class's own
`__post_init__` validation; any error is one `ConfigError` line naming the dotted key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from alignflow.errors import ConfigError
from alignflow.flows.config.sources import (
    Keys,
    Overrides,
    apply_flags,
    apply_sets,
    flatten,
    is_section,
    read_yaml,
)
from alignflow.flows.config.types import (
    check_config_class,
    default_of,
    has_default,
    init_fields,
    key_of,
    section,
    type_name,
)
from alignflow.flows.config.values import coerce

T = TypeVar("T")


def _section_value(sub: type, f: dataclasses.Field, base: Any, over: Overrides, key: str) -> Any:
    current = getattr(base, f.name) if base is not None else default_of(f)
    return _build(sub, current if isinstance(current, sub) else None, over, key + ".")


def _build(cls: type[T], base: T | None, over: Overrides, prefix: str) -> T:
    """Construct `cls` (or replace fields of `base`) from the overrides under `prefix`."""
    kw: dict[str, Any] = {}
    for f, tp in init_fields(cls):
        key, sub = prefix + key_of(f), section(tp)
        if key in over:
            kw[f.name] = coerce(over[key][0], tp, key, over[key][1])
        elif sub is not None and (any(k.startswith(key + ".") for k in over)
                                  or (base is None and not has_default(f))):
            kw[f.name] = _section_value(sub, f, base, over, key)
        elif base is None and not has_default(f):
            raise ConfigError(f"missing required config key {key!r} ({type_name(tp)}): set it "
                              f"in the config file or with --set {key}=...")
    return _construct(cls, base, kw, prefix)


def _construct(cls: type[T], base: T | None, kw: dict[str, Any], prefix: str) -> T:
    """Run the class's own validation, turning its errors into located `ConfigError`s."""
    try:
        return dataclasses.replace(base, **kw) if base is not None else cls(**kw)
    except (ValueError, TypeError) as exc:
        if getattr(exc, "located", False):
            raise
        field = getattr(exc, "field", None)
        if field:
            msg = f"config key {prefix + field!r}: {exc.detail}"  # type: ignore[attr-defined]
        else:
            where = f" at {prefix.rstrip('.')!r}" if prefix else ""
            msg = f"invalid {cls.__name__}{where}: {exc}"
        err = ConfigError(msg)
        err.located = True  # type: ignore[attr-defined]
        raise err from exc


def load_config(cls: type[T], *, config_file: str | Path | None = None,
                sets: list[str] | tuple[str, ...] = (), flags: list[str] | None = None,
                aliases: Mapping[str, str] | None = None) -> T:
    """Defaults < YAML `config_file` < `--set a.b=v` items < flags (later sources win).

    `flags` are raw argv tokens (`["--init_kl_coef", "0.01", "--use_kl_loss"]`) named by a
    dotted key (`--optim.learning_rate`) or an alias (default: `cls.ALIASES`).
    """
    check_config_class(cls)
    keys, over = Keys.of(cls, aliases), {}
    if config_file is not None:
        flatten(keys, read_yaml(config_file), f"config file '{config_file}'", over)
    apply_sets(keys, sets, over)
    apply_flags(keys, flags or [], over)
    return _build(cls, None, over, "")


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """Strict inverse of `to_dict` (aliases accepted): unknown keys and bad values raise."""
    check_config_class(cls)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{cls.__name__}: expected a mapping, got a {type(data).__name__}")
    over: Overrides = {}
    flatten(Keys.of(cls), data, "dict", over)
    return _build(cls, None, over, "")


def known_part(cls: type, data: Mapping[str, Any]) -> tuple[dict, list[str]]:
    """(the part of `data` whose keys `cls` has, the dotted keys left out): a run's saved
    config read by newer code that no longer has some of its keys."""
    keys, dropped = Keys.of(cls), []

    def walk(node: Mapping, prefix: str) -> dict:
        out = {}
        for name, value in node.items():
            full = f"{prefix}{name}"
            if isinstance(value, Mapping) and is_section(keys, full):
                out[name] = walk(value, f"{full}.")
            elif all(k in keys.paths for k in keys.canonical(full)):
                out[name] = value
            else:
                dropped.append(full)
        return out
    return walk(data, ""), dropped


def to_dict(cfg: Any) -> Any:
    """Plain JSON/YAML-ready data (nested dicts, lists, scalars) for run metadata."""
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {key_of(f): to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg)
                if f.init}
    if isinstance(cfg, list | tuple):
        return [to_dict(v) for v in cfg]
    if isinstance(cfg, Mapping):
        return {k: to_dict(v) for k, v in cfg.items()}
    return str(cfg) if isinstance(cfg, Path) else cfg


def dump_yaml(cfg: Any) -> str:
    """The config as a YAML file that `load_config(config_file=...)` reads back unchanged."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, default_flow_style=False)
