"""Build a flow's config from `--config FILE`, `--set KEY=VALUE` and leftover flags.

Typed flows (first parameter annotated with a config dataclass) go through
`alignflow.config.load_config`; flows taking a plain dict get the YAML mapping with `--set`
values parsed as YAML scalars.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from alignflow.artifacts.errors import ConfigError
from alignflow.flows.loader import canonical_ref, load_flow


def build_config(ref: str, config_file: str | None, sets: list[str], flags: list[str]) -> Any:
    """The config object for `alignflow run REF ...`; `ConfigError` in one line when bad."""
    _flow, cls = load_flow(canonical_ref(ref))
    if cls is not None:
        from alignflow.config import load_config

        return load_config(cls, config_file=config_file, sets=sets, flags=flags)
    if flags:
        raise ConfigError(f"unknown flag {flags[0]!r}: flow {ref!r} takes a plain dict config; "
                          "use --set KEY=VALUE")
    data = _read_yaml(config_file) if config_file else {}
    for item in sets:
        key, eq, value = item.partition("=")
        if not eq or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. --set steps=3")
        _put(data, key.strip(), yaml.safe_load(value) if value else "", item)
    return data or None


def _read_yaml(path: str) -> dict:
    if not Path(path).is_file():
        raise ConfigError(f"config file {path!r} not found; expected a YAML file")
    try:
        data = yaml.safe_load(Path(path).read_text())
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark else ""
        raise ConfigError(f"config file {path!r}{where}: malformed YAML") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config file {path!r}: expected a mapping at the top level")
    return data


def _put(data: dict, key: str, value: Any, item: str) -> None:
    *parents, leaf = key.split(".")
    node = data
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise ConfigError(f"--set {item!r}: {part!r} is not a mapping in the config")
    node[leaf] = value
