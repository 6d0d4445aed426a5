"""`--help-config`: every settable key of a config class with its type, default, aliases
and help text (a field's `metadata["help"]`, else a `name: text` line of its class docstring).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from alignflow.flows.config.build import to_dict
from alignflow.flows.config.types import (
    aliases,
    check_config_class,
    default_of,
    has_default,
    init_fields,
    is_optional,
    key_of,
    section,
    type_name,
)


@dataclasses.dataclass(frozen=True)
class ConfigField:
    """One settable leaf (or optional section) of a config tree, for `--help-config`."""

    path: str
    type: str
    default: Any
    required: bool
    help: str


def config_fields(cls: type) -> list[ConfigField]:
    """Every settable dotted key with its type, default and help, in declaration order."""
    check_config_class(cls)
    out: list[ConfigField] = []
    _collect(cls, None, "", out)
    return out


def _collect(cls: type, base: Any, prefix: str, out: list[ConfigField]) -> None:
    docs = _doc_help(cls)
    for f, tp in init_fields(cls):
        key, sub = prefix + key_of(f), section(tp)
        default = getattr(base, f.name) if base is not None else default_of(f)
        help_text = f.metadata.get("help") or docs.get(f.name, "")
        if sub is not None:
            if default is None and is_optional(tp):
                out.append(ConfigField(key, type_name(tp), None, False, help_text))
            _collect(sub, default if isinstance(default, sub) else None, key + ".", out)
            continue
        required = base is None and not has_default(f)
        out.append(ConfigField(key, type_name(tp), to_dict(default), required, help_text))


@functools.cache
def _doc_help(cls: type) -> dict[str, str]:
    """`name: text` entries of the class docstring, or of a base class's (Google-style
    attributes), by field name; an entry goes on over the lines indented below it."""
    names = {f.name for f in dataclasses.fields(cls)}
    found: dict[str, str] = {}
    docs = [k.__doc__ or "" for k in cls.__mro__ if dataclasses.is_dataclass(k)]  # own first
    entry, indent = None, 0
    for line in "\n".join(docs).splitlines():
        depth = len(line) - len(line.lstrip())
        name, colon, text = line.strip().partition(":")
        name = name.split(" ")[0]
        if colon and name in names and text.strip() and name not in found:
            entry, indent = name, depth
            found[name] = text.strip()
        elif entry is not None and line.strip() and depth > indent:
            found[entry] += " " + line.strip()
        else:
            entry = None
    return found


def alias_names(cls: type) -> dict[str, list[str]]:
    """Canonical key -> its other names (`--flag` for flat OpenRLHF flags, dotted names
    as they are: keys renamed since, usable in YAML, `--set` and as flags)."""
    names: dict[str, list[str]] = {}
    for alias, found in aliases(cls).items():
        for key in found:
            names.setdefault(key, []).append(alias if "." in alias else f"--{alias}")
    return names


def format_config_help(cls: type) -> str:
    """`--help-config` text: one line per canonical dotted key (its flag is `--KEY`) with its
    type, default, help and other names (OpenRLHF 0.9 flags, renamed keys)."""
    names = alias_names(cls)
    rows = []
    for f in config_fields(cls):
        default = "(required)" if f.required else f"= {f.default!r}"
        also = f"  (also {', '.join(names[f.path])})" if f.path in names else ""
        rows.append((f.path, f"{f.type} {default}", (f"  -- {f.help}" if f.help else "") + also))
    width = max((len(r[0]) for r in rows), default=0)
    lines = [f"{cls.__name__} keys (YAML file < --set KEY=VALUE < --KEY VALUE flags):"]
    lines += [f"  {p.ljust(width)}  {t}{h}" for p, t, h in rows]
    return "\n".join(lines)
