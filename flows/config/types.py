"""Reading a config class's shape: its fields, their annotations, its sections and paths.

A config is a tree of `@dataclass(frozen=True, kw_only=True)` classes; a field whose
annotation is such a class (or `Class | None`) is a section, every other field a leaf.
"""

from __future__ import annotations

import dataclasses
import functools
import keyword
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

if TYPE_CHECKING:
    from _typeshed import DataclassInstance


@functools.cache
def hints(cls: type) -> dict[str, Any]:
    try:
        return typing.get_type_hints(cls)
    except NameError as exc:  # string annotations naming a class local to a function
        raise TypeError(f"{cls.__qualname__}: cannot resolve annotation ({exc}); define "
                        "config classes at module level") from exc


def init_fields(cls: type) -> Iterator[tuple[dataclasses.Field, Any]]:
    """(field, annotation) for every field the constructor takes."""
    found = hints(cls)
    for f in dataclasses.fields(cls):
        if f.init:
            yield f, found[f.name]


def key_of(f: dataclasses.Field) -> str:
    """The config key of a field: its name, less the trailing `_` that lets a field be
    named after a Python keyword (`async_` is the key `async`)."""
    name = f.name
    return name[:-1] if name.endswith("_") and keyword.iskeyword(name[:-1]) else name


def is_union(tp: Any) -> bool:
    return get_origin(tp) in (Union, types.UnionType)


def is_optional(tp: Any) -> bool:
    return is_union(tp) and type(None) in get_args(tp)


def section(tp: Any) -> type[DataclassInstance] | None:
    """The dataclass behind `D` or `D | None`, else None."""
    if dataclasses.is_dataclass(tp) and isinstance(tp, type):
        return tp
    if is_union(tp):
        found = [a for a in get_args(tp) if dataclasses.is_dataclass(a) and isinstance(a, type)]
        return found[0] if len(found) == 1 else None
    return None


@functools.cache
def config_paths(cls: type) -> dict[str, Any]:
    """Every dotted path (sections and leaves) of a config class -> its annotation."""
    out: dict[str, Any] = {}
    for f, tp in init_fields(cls):
        out[key_of(f)] = tp
        sub = section(tp)
        if sub is not None:
            out.update({f"{key_of(f)}.{k}": v for k, v in config_paths(sub).items()})
    return out


AliasTarget = str | tuple[str, ...]


def targets(target: AliasTarget) -> tuple[str, ...]:
    """An alias's canonical keys: one, or several when one old flag set several keys
    (OpenRLHF 0.9's `--lr_warmup_ratio` set both the actor's and the critic's)."""
    return (target,) if isinstance(target, str) else tuple(target)


def aliases(cls: type) -> dict[str, tuple[str, ...]]:
    """`cls.ALIASES`: other names of its keys (OpenRLHF flags, keys that were renamed) ->
    the canonical dotted key(s), keeping the targets the class has (one table may serve
    several config classes). Every source (YAML, `--set`, flags) accepts them."""
    paths = config_paths(cls)
    found = {}
    for alias, target in getattr(cls, "ALIASES", {}).items():
        kept = tuple(k for k in targets(target) if k in paths)
        if kept:
            found[alias] = kept
    # a keyword field's attribute name (`async_`): how the codec writes it in run.json
    found.update({f"{p}_": (p,) for p in paths if keyword.iskeyword(p.rsplit(".", 1)[-1])})
    return found


def retired(cls: type) -> frozenset[str]:
    """`cls.RETIRED`: dotted keys alignflow's own earlier layouts had and the class no longer
    has; a resumed run's saved config may hold them (dropped with a note), while any other
    unknown key is an error."""
    return frozenset(getattr(cls, "RETIRED", ()))


def type_name(tp: Any) -> str:
    """A short human name for an annotation: `int`, `float | None`, `one of 'a', 'b'`."""
    if get_origin(tp) is Literal:
        return "one of " + ", ".join(repr(c) for c in get_args(tp))
    if is_union(tp):
        return " | ".join(type_name(a) for a in get_args(tp))
    if tp is type(None):
        return "None"
    if isinstance(tp, type) and not get_args(tp):
        return tp.__name__
    return str(tp).replace("typing.", "")


def check_config_class(cls: type) -> None:
    params = getattr(cls, "__dataclass_params__", None)
    if not isinstance(cls, type) or params is None or not params.frozen:
        raise TypeError(f"{cls!r} is not a @dataclass(frozen=True, kw_only=True) config class")


def default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def has_default(f: dataclasses.Field) -> bool:
    return f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING


PLAIN = (bool, int, float, str, Path)
