"""Building a frozen config tree from overrides, and turning it back into plain data.

`load_config(cls, config_file=, sets=, flags=)` applies the sources in order (defaults <
YAML < `--set` < flags), parses each value by its annotation and runs each class's own
`__post_init__` validation; any error is one `ConfigError` line naming the dotted key.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml

from alignflow.errors import ConfigError, ConfigProblems, collecting, report
from alignflow.flows.config.sources import (
    Keys,
    Overrides,
    apply_flags,
    apply_sets,
    flatten,
    is_section,
    read_yaml,
    set_plain,
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

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

T = TypeVar("T", bound="DataclassInstance")  # a config class (`check_config_class`)


def _section_value(sub: type[DataclassInstance], f: dataclasses.Field, base: Any,
                   over: Overrides, key: str) -> Any:
    current = getattr(base, f.name) if base is not None else default_of(f)
    built = _build(sub, current if isinstance(current, sub) else None, over, key + ".")
    return current if built is None else built  # a bad section: its problems are reported


def _build(cls: type[T], base: T | None, over: Overrides, prefix: str) -> T | None:
    """Construct `cls` (or replace fields of `base`) from the overrides under `prefix`;
    None when a problem was reported (a bad value, a missing key, a failed check)."""
    kw: dict[str, Any] = {}
    ok = True
    for f, tp in init_fields(cls):
        key, sub = prefix + key_of(f), section(tp)
        if key in over:
            try:
                kw[f.name] = coerce(over[key][0], tp, key, over[key][1])
            except ConfigError as err:
                report(err)
                ok = False
        elif sub is not None and (any(k.startswith(key + ".") for k in over)
                                  or (base is None and not has_default(f))):
            kw[f.name] = _section_value(sub, f, base, over, key)
        elif base is None and not has_default(f):
            report(ConfigError(f"missing required config key {key!r} ({type_name(tp)}): set "
                               f"it in the config file or with --set {key}=..."))
            ok = False
    return _construct(cls, base, kw, prefix) if ok else None


def _located(exc: Exception, cls: type, prefix: str) -> ConfigError:
    field, detail = getattr(exc, "field", None), getattr(exc, "detail", "")
    if field:
        return ConfigError(f"config key {prefix + field!r}: {detail}")
    if isinstance(exc, ConfigError) and str(exc).startswith("config key "):
        return exc
    where = f" at {prefix.rstrip('.')!r}" if prefix else ""
    return ConfigError(f"invalid {cls.__name__}{where}: {exc}")


def _construct(cls: type[T], base: T | None, kw: dict[str, Any], prefix: str) -> T | None:
    """Run the class's own checks, reporting each of its problems located by `prefix`
    (an exception after a reported problem is its consequence and is dropped)."""
    caught: list[Exception] = []
    with collecting() as found:
        try:
            obj = dataclasses.replace(base, **kw) if base is not None else cls(**kw)
        except Exception as exc:
            if not found and not isinstance(exc, ValueError | TypeError):
                raise
            caught, obj = [exc], None
    problems = found or caught  # the check's own exception only when it reported none
    for problem in problems:
        report(_located(problem, cls, prefix))
    return None if problems else obj


@dataclasses.dataclass(frozen=True)
class Resolved:
    """A config and where each value came from: `origins[key]` for every key a source set
    (`config file 'f'`, `--set k`, `--flag`, or a base's own label); unset keys are defaults."""

    config: Any
    origins: dict[str, str]


def resolve_config(cls: type[T], *, config_file: str | Path | None = None,
                   sets: list[str] | tuple[str, ...] = (), flags: list[str] | None = None,
                   aliases: Mapping[str, Any] | None = None,
                   base: Mapping[str, tuple[Any, str]] | None = None) -> Resolved:
    """`base` (key -> (value, origin), e.g. OpenRLHF's defaults) < YAML `config_file` <
    `--set a.b=v` items < flags; every problem of every source is reported at once
    (`ConfigProblems`, one line each; a single problem is raised as itself)."""
    check_config_class(cls)
    keys, over = Keys.of(cls, aliases), dict(base or {})
    with collecting() as found:
        if config_file is not None:
            try:
                flatten(keys, read_yaml(config_file), f"config file '{config_file}'", over)
            except ConfigError as err:
                report(err)
        apply_sets(keys, sets, over)
        apply_flags(keys, flags or [], over)
        config = _build(cls, None, over, "")
    if found:
        raise found[0] if len(found) == 1 else ConfigProblems(found)
    return Resolved(config, {k: origin for k, (_v, origin) in over.items()})


def load_config(cls: type[T], *, config_file: str | Path | None = None,
                sets: list[str] | tuple[str, ...] = (), flags: list[str] | None = None,
                aliases: Mapping[str, Any] | None = None) -> T:
    """Defaults < YAML `config_file` < `--set a.b=v` items < flags (later sources win).

    `flags` are raw argv tokens (`["--init_kl_coef", "0.01", "--use_kl_loss"]`) named by a
    dotted key (`--algo.kl.init_coef`) or an alias (default: `cls.ALIASES`). All problems
    are reported at once (`resolve_config`).
    """
    return resolve_config(cls, config_file=config_file, sets=sets, flags=flags,
                          aliases=aliases).config


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """Strict inverse of `to_dict` (aliases accepted): unknown keys and bad values raise."""
    check_config_class(cls)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{cls.__name__}: expected a mapping, got a {type(data).__name__}")
    over: Overrides = {}
    flatten(Keys.of(cls), data, "dict", over)
    built = _build(cls, None, over, "")
    if built is None:  # never: outside `collecting()` a problem raises as it is reported
        raise ConfigError(f"{cls.__name__}: invalid config")
    return built


def with_sets(config: Any, sets: list[str] | tuple[str, ...]) -> Any:
    """`config` with `--set a.b=v` items applied on top (`alignflow resume RUN --set`: a fix
    to a stored run's config); every problem at once, one line each, as `resolve_config`."""
    if isinstance(config, Mapping) or config is None:
        return set_plain(copy.deepcopy(dict(config or {})), sets)
    cls = type(config)
    over: Overrides = {}
    with collecting() as found:
        apply_sets(Keys.of(cls), sets, over)
        built = _build(cls, config, over, "") if not found else None
    if found:
        raise found[0] if len(found) == 1 else ConfigProblems(found)
    return built


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
