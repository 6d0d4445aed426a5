"""The command-line side of configs: `--set KEY=VALUE` items, OpenRLHF-style flags, and
`--help-config` text. `alignflow.config` owns the typed model; this module only turns argv
tokens into its overrides, so flows can accept the flags users know from OpenRLHF.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from typing import Any, get_args, get_origin

from alignflow.artifacts.errors import ConfigError
from alignflow.config import (
    FALSE_WORDS,
    TRUE_WORDS,
    Overrides,
    check_key,
    config_fields,
    config_paths,
    is_optional,
    load_config,
    put_override,
    split_list,
    suggest,
    type_name,
)


def apply_sets(root: type, items: list[str] | tuple[str, ...], over: Overrides) -> None:
    """Add each `a.b.c=value` item (value kept as text, parsed later by the field type)."""
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set train.lr=1e-6")
        key = key.strip()
        check_key(root, key, "--set")
        put_override(over, key, value, f"--set {key}")


def _flag_table(root: type, aliases: Mapping[str, str]) -> dict[str, str]:
    """Flag spelling (dashes as underscores) -> dotted key, for aliases and plain keys."""
    paths = config_paths(root)
    table = {p.replace("-", "_"): p for p in paths}
    for alias, key in aliases.items():
        if key not in paths:
            raise ConfigError(f"flag alias '--{alias}' of {root.__name__} points at unknown "
                              f"config key {key!r}{suggest(key, list(paths))}")
        table[alias.replace("-", "_")] = key
    return table


def _is_bool(tp: Any) -> bool:
    return tp is bool or (is_optional(tp) and bool in get_args(tp))


def _flag_key(name: str, table: dict[str, str], root: type) -> tuple[str, bool]:
    """(dotted key, negated) for `--name`; `--no-name` / `--no_name` negates a bool."""
    norm = name.replace("-", "_")
    if norm in table:
        return table[norm], False
    if norm.startswith("no_") and table.get(norm[3:]) and _is_bool(config_paths(root)[table[norm[3:]]]):
        return table[norm[3:]], True
    raise ConfigError(f"unknown flag '--{name}'{suggest(norm, list(table), '--')}")


def _flag_value(tp: Any, name: str, rest: list[str]) -> Any:
    """Consume the value tokens of `--name` from `rest`: none for bools, many for lists."""
    if _is_bool(tp):
        return rest.pop(0) if rest and rest[0].lower() in TRUE_WORDS | FALSE_WORDS else True
    if get_origin(tp) in (list, tuple):
        values: list[str] = []
        while rest and not rest[0].startswith("--"):
            values.extend(split_list(rest.pop(0)))
        return values
    if not rest or rest[0].startswith("--"):
        raise ConfigError(f"flag '--{name}' needs a value ({type_name(tp)})")
    return rest.pop(0)


def apply_flags(root: type, flags: list[str], aliases: Mapping[str, str],
                over: Overrides) -> None:
    """Add `--flag value`, `--flag=value`, bare bool `--flag` and `--no-flag` tokens."""
    table, rest = _flag_table(root, aliases), list(flags)
    while rest:
        token = rest.pop(0)
        if not token.startswith("--") or token == "--":
            raise ConfigError(f"unexpected argument {token!r}: expected --flag [value]")
        name, eq, value = token[2:].partition("=")
        key, negated = _flag_key(name, table, root)
        if negated and eq:
            raise ConfigError(f"flag '--{name}' takes no value")
        if not eq:
            value = False if negated else _flag_value(config_paths(root)[key], name, rest)
        put_override(over, key, value, f"--{name}")


def format_config_help(cls: type) -> str:
    """`--help-config` text: one line per dotted key with type, default and help."""
    aliases = {v: k for k, v in getattr(cls, "OPENRLHF_FLAGS", {}).items()}
    rows = []
    for f in config_fields(cls):
        default = "(required)" if f.required else f"= {f.default!r}"
        flag = f" [--{aliases[f.path]}]" if f.path in aliases else ""
        rows.append((f"{f.path}{flag}", f"{f.type} {default}", f.help))
    width = max((len(r[0]) for r in rows), default=0)
    lines = [f"{cls.__name__} keys (YAML file < --set KEY=VALUE < flags):"]
    lines += [f"  {p.ljust(width)}  {t}" + (f"  -- {h}" if h else "") for p, t, h in rows]
    return "\n".join(lines)


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    """`--config FILE`, repeatable `--set KEY=VALUE` and `--help-config` on a command."""
    parser.add_argument("--config", metavar="FILE", help="YAML config file (nested mapping)")
    parser.add_argument("--set", dest="sets", metavar="KEY=VALUE", action="append",
                        default=[], help="override one dotted config key, e.g. algo.kl.coef=0.01")
    parser.add_argument("--help-config", action="store_true",
                        help="list every config key with its type, default and help")


def config_from_args(cls: type, args: argparse.Namespace, flags: list[str] | None = None) -> Any:
    """Build `cls` from a namespace made by `add_config_arguments` plus leftover flag tokens
    (e.g. the unknowns of `parse_known_args`)."""
    return load_config(cls, config_file=args.config, sets=args.sets, flags=flags)
