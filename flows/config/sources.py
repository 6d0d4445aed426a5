"""Where config values come from, in order: defaults < YAML file < `--set KEY=VALUE` <
flags. Each source turns its input into overrides: dotted key -> (raw value, origin).

Keys may be spelled by an alias (`cls.ALIASES`: OpenRLHF flag names, keys that were
renamed); a section alias renames every key below it (`train.lr` -> `optim.lr`).
Unknown keys fail at once, naming the closest valid key.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import yaml

from alignflow.errors import ConfigError, report
from alignflow.flows.config.tokens import Group, groups
from alignflow.flows.config.types import (
    AliasTarget,
    aliases,
    config_paths,
    is_optional,
    is_union,
    section,
    targets,
    type_name,
)
from alignflow.flows.config.values import FALSE_WORDS, TRUE_WORDS, split_list

Overrides = dict[str, tuple[Any, str]]  # dotted key -> (raw value, where it came from)


def suggest(key: str, pool: list[str], prefix: str = "") -> str:
    """` (did you mean 'x'?)` for the closest name in `pool`, by full path then last part."""
    match = difflib.get_close_matches(key, pool, n=1, cutoff=0.6)
    if not match:
        tails = {p.rsplit(".", 1)[-1]: p for p in pool}
        near = difflib.get_close_matches(key.rsplit(".", 1)[-1], list(tails), n=1, cutoff=0.8)
        match = [tails[near[0]]] if near else []
    return f" (did you mean '{prefix}{match[0]}'?)" if match else ""


@dataclass(frozen=True)
class Keys:
    """The keys a config class accepts: its dotted paths and their aliases."""

    cls: type
    paths: Mapping[str, Any]
    aliases: Mapping[str, tuple[str, ...]]

    @classmethod
    def of(cls, config_cls: type, table: Mapping[str, AliasTarget] | None = None) -> Keys:
        """`table` replaces the class's own `ALIASES` when given."""
        found = aliases(config_cls) if table is None else {a: targets(t) for a, t in table.items()}
        return cls(config_cls, config_paths(config_cls), found)

    def canonical(self, key: str) -> tuple[str, ...]:
        """`key` with an alias (of the key, or of a section above it) replaced by its
        target(s); a real key wins over an alias of the same spelling (`loss` the section,
        `--loss`). An unknown key comes back as itself."""
        if key in self.paths:
            return (key,)
        if key in self.aliases:
            return self.aliases[key]
        head, _, _ = key.rpartition(".")
        while head:
            found = self.aliases.get(head)
            if found and len(found) == 1 and section(self.paths.get(found[0])) is not None:
                return (f"{found[0]}.{key[len(head) + 1:]}",)
            head, _, _ = head.rpartition(".")
        return (key,)

    def check(self, key: str, origin: str) -> tuple[str, ...]:
        """The canonical key(s) of `key`; a `ConfigError` naming the closest valid key is
        reported for an unknown one (which then has no keys)."""
        found = self.canonical(key)
        if any(k not in self.paths for k in found):
            pool = list(self.paths) + list(self.aliases)
            report(ConfigError(f"unknown config key {key!r} in {origin}{suggest(key, pool)}"))
            return ()
        return found

    def old_section(self, key: str) -> bool:
        """Whether `key` was a section whose keys are now aliases (`optim.learning_rate`),
        so a mapping under it is read key by key."""
        found = self.canonical(key)
        if len(found) == 1 and found[0] in self.paths and (
                get_origin(self.paths[found[0]]) is dict):
            return False
        return any(a.startswith(key + ".") for a in self.aliases)


def put_override(over: Overrides, key: str, value: Any, origin: str) -> None:
    """Later sources win; a section value replaces its keys and a key replaces a null section."""
    for k in [k for k in over if k.startswith(key + ".") or key.startswith(k + ".")]:
        del over[k]
    over[key] = (value, origin)


def flatten(keys: Keys, data: Mapping, origin: str, over: Overrides, prefix: str = "") -> None:
    """A nested mapping (YAML file, dict) -> overrides, checking every key on the way."""
    for name, value in data.items():
        full = f"{prefix}{name}"
        if isinstance(value, Mapping) and is_section(keys, full):
            flatten(keys, value, origin, over, f"{full}.")  # keep the spelling: a key
            continue                                        # may alias below it
        for key in keys.check(full, origin):
            put_override(over, key, value, origin)


def is_section(keys: Keys, key: str) -> bool:
    """Whether a mapping under `key` holds keys (a section, or an old section's aliases)."""
    found = keys.canonical(key)
    if len(found) == 1 and found[0] in keys.paths and section(keys.paths[found[0]]) is not None:
        return True
    return keys.old_section(key)


def read_yaml(path: str | Path) -> Mapping:
    """The mapping in a YAML config file ({} when empty); one-line errors otherwise."""
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


def _split_set(item: str) -> tuple[str, str]:
    key, eq, value = item.partition("=")
    if not eq or not key.strip():
        raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set optim.learning_rate=1e-6")
    return key.strip(), value


def apply_sets(keys: Keys, items: list[str] | tuple[str, ...], over: Overrides) -> None:
    """Add each `a.b.c=value` item (value kept as text, parsed later by the field type)."""
    for item in items:
        try:
            key, value = _split_set(item)
        except ConfigError as err:
            report(err)
            continue
        for found in keys.check(key, "--set"):
            put_override(over, found, value, f"--set {key}")


def flag_table(keys: Keys) -> dict[str, tuple[str, ...]]:
    """Flag spelling (dashes as underscores) -> dotted key(s), for keys and their aliases."""
    table: dict[str, tuple[str, ...]] = {p.replace("-", "_"): (p,) for p in keys.paths}
    for alias, found in keys.aliases.items():
        for key in found:
            if key not in keys.paths:
                raise ConfigError(f"alias '{alias}' of {keys.cls.__name__} points at unknown "
                                  f"config key {key!r}{suggest(key, list(keys.paths))}")
        table.setdefault(alias.replace("-", "_"), found)
    return table


def _is_seq(tp: Any) -> bool:
    """A list or tuple annotation, or a union holding one (`--eps_clip_low_high 0.2 0.28`)."""
    options = get_args(tp) if is_union(tp) else (tp,)
    return any(get_origin(a) in (list, tuple) for a in options)


def _is_bool(tp: Any) -> bool:
    return tp is bool or (is_optional(tp) and bool in get_args(tp))


def _flag_key(keys: Keys, name: str, table: dict[str, tuple[str, ...]]
              ) -> tuple[tuple[str, ...], bool]:
    """(dotted key(s), negated) for `--name`; `--no-name` / `--no_name` negates a bool.
    `ConfigError` naming the closest flag for an unknown one."""
    norm = name.replace("-", "_")
    if norm in table:
        return table[norm], False
    found = keys.canonical(norm)
    if all(k in keys.paths for k in found):
        return found, False
    head, dot, last = norm.rpartition(".")  # --no_x, and --a.no_x (--actor.muon.no_nesterov)
    base = f"{head}{dot}{last[3:]}" if last.startswith("no_") else None
    if base and table.get(base) and _is_bool(keys.paths[table[base][0]]):
        return table[base], True
    raise ConfigError(f"unknown flag '--{name}'{suggest(norm, list(table), '--')}")


def _flag_value(tp: Any, name: str, values: list[str]) -> tuple[Any, list[str]]:
    """`--name`'s value from its value tokens, and the tokens it leaves: a bool takes a
    true/false word if one follows, a list takes them all, anything else exactly one."""
    if _is_bool(tp):
        if values and values[0].lower() in TRUE_WORDS | FALSE_WORDS:
            return values[0], values[1:]
        return True, values
    if _is_seq(tp):
        items = [item for token in values for item in split_list(token)]
        one = len(items) == 1 and get_origin(tp) not in (list, tuple)
        return (items[0] if one else items), []
    if not values:
        raise ConfigError(f"flag '--{name}' needs a value ({type_name(tp)})")
    return values[0], values[1:]


def apply_flags(keys: Keys, flags: list[str], over: Overrides) -> None:
    """Add `--flag value`, `--flag=value`, bare bool `--flag` and `--no-flag` tokens
    (grouped by `tokens.groups`). A bad flag is reported with its value tokens skipped,
    so the next flag is still read."""
    table = flag_table(keys)
    for group in groups(flags):
        try:
            _apply_flag(keys, table, group, over)
        except ConfigError as err:
            report(err)


def _apply_flag(keys: Keys, table: dict[str, tuple[str, ...]], group: Group,
                over: Overrides) -> None:
    """One flag with its value tokens; tokens it does not take are refused."""
    name, values, eq = group
    if not name:
        raise ConfigError(f"unexpected argument {values[0]!r}: expected --flag [value]")
    found, negated = _flag_key(keys, name, table)
    if negated and eq:
        raise ConfigError(f"flag '--{name}' takes no value")
    value, left = (values[0], []) if eq else (False, values) if negated else \
        _flag_value(keys.paths[found[0]], name, values)
    for key in found:
        put_override(over, key, value, f"--{name}")
    if left:
        raise ConfigError(f"unexpected argument {left[0]!r}: expected --flag [value]")


def load_plain(config_file: str | Path | None, sets: list[str] | tuple[str, ...]) -> dict | None:
    """The config of a flow that takes a plain dict: the YAML mapping, `--set` values parsed
    as YAML scalars (`--set steps=3` is the int 3)."""
    return set_plain(dict(read_yaml(config_file)) if config_file else {}, sets) or None


def set_plain(data: dict, sets: list[str] | tuple[str, ...]) -> dict:
    """`data` with each `--set a.b=v` item applied in place (values parsed as YAML)."""
    for item in sets:
        key, value = _split_set(item)
        *parents, leaf = key.split(".")
        node = data
        for part in parents:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"--set {item!r}: {part!r} is not a mapping in the config")
        node[leaf] = yaml.safe_load(value) if value else ""
    return data
