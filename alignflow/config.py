"""Typed, frozen flow configs built from defaults, a YAML file, `--set` overrides and flags.

A flow config is a tree of `@dataclass(frozen=True, kw_only=True)` classes, validated once
in `__post_init__` and never mutated (derived values are properties). Sources apply in
order, each overriding the ones before: class defaults < YAML file < `--set a.b=v` <
OpenRLHF-style flags (`--init_kl_coef 0.01`), which a config maps onto dotted keys with a
class attribute `OPENRLHF_FLAGS: ClassVar[dict[str, str]]`. Values are parsed by the
field's annotation, so a typo or a bad value fails before any work starts, in one line.
"""

from __future__ import annotations

import dataclasses
import difflib
import functools
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

import yaml

from alignflow.artifacts.errors import ConfigError

T = TypeVar("T")
TRUE_WORDS = {"true", "1", "yes", "y", "on"}
FALSE_WORDS = {"false", "0", "no", "n", "off"}
NULL_WORDS = {"null", "none", "~"}


@dataclasses.dataclass(frozen=True)
class ConfigField:
    """One settable leaf (or optional section) of a config tree, for `--help-config`."""

    path: str
    type: str
    default: Any
    required: bool
    help: str


def invalid(field: str, message: str) -> ConfigError:
    """Error for `__post_init__`; the loader prefixes the field with its full dotted path.

    Use as `raise invalid("coef", f"must be >= 0, got {self.coef}")`.
    """
    err = ConfigError(f"config key {field!r}: {message}")
    err.field, err.detail = field, message  # type: ignore[attr-defined]
    return err


# ---------------------------------------------------------------- schema walking


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError as exc:  # string annotations naming a class local to a function
        raise TypeError(f"{cls.__qualname__}: cannot resolve annotation ({exc}); define "
                        "config classes at module level") from exc


def _fields(cls: type) -> Iterator[tuple[dataclasses.Field, Any]]:
    hints = _hints(cls)
    for f in dataclasses.fields(cls):
        if f.init:
            yield f, hints[f.name]


def _section(tp: Any) -> type | None:
    """The dataclass behind `D` or `D | None`, else None."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    if _is_union(tp):
        found = [a for a in get_args(tp) if dataclasses.is_dataclass(a)]
        return found[0] if len(found) == 1 else None
    return None


def _is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def is_optional(tp: Any) -> bool:
    return _is_union(tp) and type(None) in get_args(tp)


@functools.cache
def config_paths(cls: type) -> dict[str, Any]:
    """Every dotted path (sections and leaves) of a config class -> its annotation."""
    out: dict[str, Any] = {}
    for f, tp in _fields(cls):
        out[f.name] = tp
        sub = _section(tp)
        if sub is not None:
            out.update({f"{f.name}.{k}": v for k, v in config_paths(sub).items()})
    return out


def suggest(key: str, pool: list[str], prefix: str = "") -> str:
    """` (did you mean 'x'?)` for the closest name in `pool`, by full path then last part."""
    match = difflib.get_close_matches(key, pool, n=1, cutoff=0.6)
    if not match:
        tails = {p.rsplit(".", 1)[-1]: p for p in pool}
        near = difflib.get_close_matches(key.rsplit(".", 1)[-1], list(tails), n=1, cutoff=0.8)
        match = [tails[near[0]]] if near else []
    return f" (did you mean '{prefix}{match[0]}'?)" if match else ""


def check_key(cls: type, key: str, origin: str) -> Any:
    paths = config_paths(cls)
    if key not in paths:
        raise ConfigError(f"unknown config key {key!r} in {origin}{suggest(key, list(paths))}")
    return paths[key]


# ---------------------------------------------------------------- value parsing


def _bad(key: str, value: Any, expected: str, origin: str) -> ConfigError:
    return ConfigError(f"config key {key!r} = {value!r} (from {origin}): expected {expected}")


def type_name(tp: Any) -> str:
    """A short human name for an annotation: `int`, `float | None`, `one of 'a', 'b'`."""
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(c) for c in get_args(tp))
    if _is_union(tp):
        return " | ".join(type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and not get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "")


def split_list(text: str, sep: str = ",") -> list[str]:
    text = text.strip()
    return [p.strip() for p in text.split(sep)] if text else []


def _parse_seq(value: Any, key: str, origin: str) -> list[Any]:
    if isinstance(value, str):
        return yaml.safe_load(value) if value.lstrip().startswith("[") else split_list(value)
    if isinstance(value, list | tuple):
        return list(value)
    raise _bad(key, value, "a list (YAML list or comma-separated)", origin)


def _parse_map(value: Any, key: str, origin: str) -> dict[Any, Any]:
    if isinstance(value, str) and value.lstrip().startswith("{"):
        value = yaml.safe_load(value)
    elif isinstance(value, str):
        pairs = [p.partition("=") for p in split_list(value)]
        if any(not eq or not k.strip() for k, eq, _ in pairs):
            raise _bad(key, value, "a mapping ('k=v,k2=v2' or a YAML mapping)", origin)
        value = {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(value, Mapping):
        raise _bad(key, value, "a mapping ('k=v,k2=v2' or a YAML mapping)", origin)
    return dict(value)


def _scalar(value: Any, tp: type, key: str, origin: str) -> Any:
    if tp is bool:
        text = str(value).lower() if isinstance(value, str | int) else None
        if isinstance(value, bool) or text in TRUE_WORDS | FALSE_WORDS:
            return value if isinstance(value, bool) else text in TRUE_WORDS
        raise _bad(key, value, "a bool (true/false/1/0/yes/no)", origin)
    if tp is int and not isinstance(value, bool | float):
        try:
            return int(value)
        except (TypeError, ValueError):
            pass
    if tp is float and not isinstance(value, bool):
        try:
            return float(value)
        except (TypeError, ValueError):
            pass
    if tp is str and isinstance(value, str):
        return value
    if tp is Path and isinstance(value, str | Path):
        return Path(value)
    extra = " (quote it in YAML)" if tp is str and value is not None else ""
    raise _bad(key, value, f"{type_name(tp)}{extra}", origin)


def _coerce_seq(value: Any, tp: Any, key: str, origin: str) -> list | tuple:
    """`list[X]`, `tuple[X, ...]` or a fixed `tuple[X, Y]` from a list or comma text."""
    items, args = _parse_seq(value, key, origin), get_args(tp)
    if get_origin(tp) is list or (len(args) == 2 and args[1] is Ellipsis):
        out = [coerce(v, args[0], f"{key}[{i}]", origin) for i, v in enumerate(items)]
        return out if get_origin(tp) is list else tuple(out)
    if len(items) != len(args):
        raise _bad(key, value, f"{len(args)} items: {type_name(tp)}", origin)
    pairs = enumerate(zip(items, args, strict=True))
    return tuple(coerce(v, a, f"{key}[{i}]", origin) for i, (v, a) in pairs)


def coerce(value: Any, tp: Any, key: str, origin: str = "code") -> Any:
    """Parse `value` (a CLI string or a YAML/Python value) as annotation `tp`."""
    origin_tp, args = get_origin(tp), get_args(tp)
    if tp is Any:
        return value
    if _is_union(tp):
        is_null = value is None or (isinstance(value, str) and value.lower() in NULL_WORDS)
        if is_null and type(None) in args:
            return None
        for arg in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arg, key, origin)
            except ConfigError:
                continue
        raise _bad(key, value, type_name(tp), origin)
    if origin_tp is Literal:
        for choice in args:
            if value == choice or (isinstance(value, str) and str(choice) == value):
                return choice
        raise _bad(key, value, type_name(tp), origin)
    if origin_tp in (list, tuple):
        return _coerce_seq(value, tp, key, origin)
    if origin_tp is dict:
        kt, vt = args
        return {coerce(k, kt, f"{key}.<key>", origin): coerce(v, vt, f"{key}.{k}", origin)
                for k, v in _parse_map(value, key, origin).items()}
    if dataclasses.is_dataclass(tp):
        if isinstance(value, tp):
            return value
        raise _bad(key, value, f"a {tp.__name__} section (set its keys, e.g. {key}.<field>)", origin)
    if tp in (bool, int, float, str, Path):
        return _scalar(value, tp, key, origin)
    raise TypeError(f"config key {key!r}: unsupported annotation {tp!r}")


# ---------------------------------------------------------------- sources -> overrides

Overrides = dict[str, tuple[Any, str]]  # dotted key -> (raw value, where it came from)


def put_override(over: Overrides, key: str, value: Any, origin: str) -> None:
    """Later sources win; a section value replaces its keys and a key replaces a null section."""
    for k in [k for k in over if k.startswith(key + ".") or key.startswith(k + ".")]:
        del over[k]
    over[key] = (value, origin)


def _flatten(root: type, data: Mapping, prefix: str, origin: str, over: Overrides) -> None:
    for name, value in data.items():
        key = f"{prefix}{name}"
        tp = check_key(root, key, origin)
        if _section(tp) is not None and isinstance(value, Mapping):
            _flatten(root, value, key + ".", origin, over)
        else:
            put_override(over, key, value, origin)


def _read_yaml(path: str | Path) -> Mapping:
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"config file '{p}' not found")
    try:
        data = yaml.safe_load(p.read_text())
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else "?"
        raise ConfigError(f"config file '{p}' line {line}: malformed YAML: {exc.problem}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"config file '{p}': malformed YAML: {exc}") from exc
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise ConfigError(f"config file '{p}': expected a mapping of config keys at the top "
                          f"level, got a {type(data).__name__}")
    return data


# ---------------------------------------------------------------- building


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


def _build(cls: type[T], base: T | None, over: Overrides, prefix: str) -> T:
    """Construct `cls` (or replace fields of `base`) from the overrides under `prefix`."""
    kw: dict[str, Any] = {}
    for f, tp in _fields(cls):
        key = prefix + f.name
        sub = _section(tp)
        if key in over:
            kw[f.name] = coerce(*over[key][:1], tp, key, over[key][1])
        elif sub is not None and (any(k.startswith(key + ".") for k in over)
                                  or (base is None and not _has_default(f))):
            current = getattr(base, f.name) if base is not None else _default(f)
            kw[f.name] = _build(sub, current if isinstance(current, sub) else None, over, key + ".")
        elif base is None and not _has_default(f):
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


def _check_class(cls: type) -> None:
    params = getattr(cls, "__dataclass_params__", None)
    if not isinstance(cls, type) or params is None or not params.frozen:
        raise TypeError(f"{cls!r} is not a @dataclass(frozen=True, kw_only=True) config class")


# ---------------------------------------------------------------- public API


def load_config(cls: type[T], *, config_file: str | Path | None = None,
                sets: list[str] | tuple[str, ...] = (), flags: list[str] | None = None,
                aliases: Mapping[str, str] | None = None) -> T:
    """Defaults < YAML `config_file` < `--set a.b=v` items < flags (later sources win).

    `flags` are raw argv tokens (`["--init_kl_coef", "0.01", "--use_kl_loss"]`) named by
    `aliases` (default: `cls.OPENRLHF_FLAGS`) or by the dotted key itself (`--train.lr`).
    """
    _check_class(cls)
    over: Overrides = {}
    if config_file is not None:
        _flatten(cls, _read_yaml(config_file), "", f"config file '{config_file}'", over)
    if sets or flags:
        from alignflow.flows.config_cli import apply_flags, apply_sets  # CLI token grammar

        apply_sets(cls, sets, over)
        table = getattr(cls, "OPENRLHF_FLAGS", {}) if aliases is None else aliases
        apply_flags(cls, flags or [], table, over)
    return _build(cls, None, over, "")


def from_dict(cls: type[T], data: Mapping[str, Any]) -> T:
    """Strict inverse of `to_dict`: unknown keys, bad values and missing keys raise."""
    _check_class(cls)
    if not isinstance(data, Mapping):
        raise ConfigError(f"{cls.__name__}: expected a mapping, got a {type(data).__name__}")
    over: Overrides = {}
    _flatten(cls, data, "", "dict", over)
    return _build(cls, None, over, "")


def to_dict(cfg: Any) -> Any:
    """Plain JSON/YAML-ready data (nested dicts, lists, scalars) for run metadata."""
    if dataclasses.is_dataclass(cfg) and not isinstance(cfg, type):
        return {f.name: to_dict(getattr(cfg, f.name)) for f in dataclasses.fields(cfg) if f.init}
    if isinstance(cfg, list | tuple):
        return [to_dict(v) for v in cfg]
    if isinstance(cfg, Mapping):
        return {k: to_dict(v) for k, v in cfg.items()}
    return str(cfg) if isinstance(cfg, Path) else cfg


def dump_yaml(cfg: Any) -> str:
    """The config as a YAML file that `load_config(config_file=...)` reads back unchanged."""
    return yaml.safe_dump(to_dict(cfg), sort_keys=False, default_flow_style=False)


def config_fields(cls: type) -> list[ConfigField]:
    """Every settable dotted key with its type, default and help, in declaration order."""
    _check_class(cls)
    out: list[ConfigField] = []
    _collect(cls, None, "", out)
    return out


def _collect(cls: type, base: Any, prefix: str, out: list[ConfigField]) -> None:
    docs = _doc_help(cls)
    for f, tp in _fields(cls):
        key, sub = prefix + f.name, _section(tp)
        default = getattr(base, f.name) if base is not None else _default(f)
        help_text = f.metadata.get("help") or docs.get(f.name, "")
        if sub is not None:
            if default is None and is_optional(tp):
                out.append(ConfigField(key, type_name(tp), None, False, help_text))
            _collect(sub, default if isinstance(default, sub) else None, key + ".", out)
            continue
        required = base is None and not _has_default(f)
        out.append(ConfigField(key, type_name(tp), to_dict(default), required, help_text))


@functools.cache
def _doc_help(cls: type) -> dict[str, str]:
    """`name: text` lines of the class docstring (Google-style attributes), by field name."""
    names = {f.name for f in dataclasses.fields(cls)}
    found: dict[str, str] = {}
    for line in (cls.__doc__ or "").splitlines():
        name, colon, text = line.strip().partition(":")
        name = name.split(" ")[0]
        if colon and name in names and text.strip() and name not in found:
            found[name] = text.strip()
    return found
