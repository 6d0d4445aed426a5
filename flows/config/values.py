"""Parsing one value by its field's annotation: CLI text or a YAML/Python value -> the type.

`coerce("0.5", float | None, key, origin)` -> 0.5; lists from `a,b` or YAML `[a, b]`, maps
from `k=v,k2=v2` or YAML `{k: v}`, bools from true/false/1/0/yes/no, `null`/`none` for
optional fields. A value that does not fit is a one-line `ConfigError` naming the key, the
value, where it came from and what was expected.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

import yaml

from alignflow.errors import ConfigError
from alignflow.flows.config.types import PLAIN, is_union, type_name

TRUE_WORDS = {"true", "1", "yes", "y", "on"}
FALSE_WORDS = {"false", "0", "no", "n", "off"}
NULL_WORDS = {"null", "none", "~"}


def bad_value(key: str, value: Any, expected: str, origin: str) -> ConfigError:
    return ConfigError(f"config key {key!r} = {value!r} (from {origin}): expected {expected}")


def split_list(text: str, sep: str = ",") -> list[str]:
    text = text.strip()
    return [p.strip() for p in text.split(sep)] if text else []


def _parse_seq(value: Any, key: str, origin: str) -> list[Any]:
    if isinstance(value, str):
        return yaml.safe_load(value) if value.lstrip().startswith("[") else split_list(value)
    if isinstance(value, list | tuple):
        return list(value)
    raise bad_value(key, value, "a list (YAML list or comma-separated)", origin)


def _parse_map(value: Any, key: str, origin: str) -> dict[Any, Any]:
    expected = "a mapping ('k=v,k2=v2' or a YAML mapping)"
    if isinstance(value, str) and value.lstrip().startswith("{"):
        value = yaml.safe_load(value)
    elif isinstance(value, str):
        pairs = [p.partition("=") for p in split_list(value)]
        if any(not eq or not k.strip() for k, eq, _ in pairs):
            raise bad_value(key, value, expected, origin)
        value = {k.strip(): v.strip() for k, _, v in pairs}
    if not isinstance(value, Mapping):
        raise bad_value(key, value, expected, origin)
    return dict(value)


def _number(value: Any, tp: type) -> Any:
    try:
        return tp(value)
    except (TypeError, ValueError):
        return None


def _scalar(value: Any, tp: type, key: str, origin: str) -> Any:
    if tp is bool:
        text = str(value).lower() if isinstance(value, str | int) else None
        if isinstance(value, bool) or text in TRUE_WORDS | FALSE_WORDS:
            return value if isinstance(value, bool) else text in TRUE_WORDS
        raise bad_value(key, value, "a bool (true/false/1/0/yes/no)", origin)
    number_ok = (tp is int and not isinstance(value, bool | float)) or \
        (tp is float and not isinstance(value, bool))
    if number_ok and (parsed := _number(value, tp)) is not None:
        return parsed
    if tp is str and isinstance(value, str):
        return value
    if tp is Path and isinstance(value, str | Path):
        return Path(value)
    extra = " (quote it in YAML)" if tp is str and value is not None else ""
    raise bad_value(key, value, f"{type_name(tp)}{extra}", origin)


def _coerce_seq(value: Any, tp: Any, key: str, origin: str) -> list | tuple:
    """`list[X]`, `tuple[X, ...]` or a fixed `tuple[X, Y]` from a list or comma text."""
    items, args = _parse_seq(value, key, origin), get_args(tp)
    if get_origin(tp) is list or (len(args) == 2 and args[1] is Ellipsis):
        out = [coerce(v, args[0], f"{key}[{i}]", origin) for i, v in enumerate(items)]
        return out if get_origin(tp) is list else tuple(out)
    if len(items) != len(args):
        raise bad_value(key, value, f"{len(args)} items: {type_name(tp)}", origin)
    pairs = enumerate(zip(items, args, strict=True))
    return tuple(coerce(v, a, f"{key}[{i}]", origin) for i, (v, a) in pairs)


def _coerce_union(value: Any, tp: Any, key: str, origin: str) -> Any:
    args = get_args(tp)
    is_null = value is None or (isinstance(value, str) and value.lower() in NULL_WORDS)
    if is_null and type(None) in args:
        return None
    for arg in (a for a in args if a is not type(None)):
        try:
            return coerce(value, arg, key, origin)
        except ConfigError:
            continue
    raise bad_value(key, value, type_name(tp), origin)


def _coerce_literal(value: Any, tp: Any, key: str, origin: str) -> Any:
    for choice in get_args(tp):
        if value == choice or (isinstance(value, str) and str(choice) == value):
            return choice
    raise bad_value(key, value, type_name(tp), origin)


def coerce(value: Any, tp: Any, key: str, origin: str = "code") -> Any:
    """Parse `value` (a CLI string or a YAML/Python value) as annotation `tp`."""
    if tp is Any:
        return value
    if is_union(tp):
        return _coerce_union(value, tp, key, origin)
    if get_origin(tp) is Literal:
        return _coerce_literal(value, tp, key, origin)
    if get_origin(tp) in (list, tuple):
        return _coerce_seq(value, tp, key, origin)
    if get_origin(tp) is dict:
        kt, vt = get_args(tp)
        return {coerce(k, kt, f"{key}.<key>", origin): coerce(v, vt, f"{key}.{k}", origin)
                for k, v in _parse_map(value, key, origin).items()}
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        if isinstance(value, tp):
            return value
        raise bad_value(key, value, f"a {tp.__name__} section (set its keys, e.g. "
                        f"{key}.<field>)", origin)
    if tp in PLAIN:
        return _scalar(value, tp, key, origin)
    raise TypeError(f"config key {key!r}: unsupported annotation {tp!r}")
