"""The config of `alignflow run FLOW [--config FILE] [--set KEY=VALUE]... [--flags]`.

A flow whose first parameter is annotated with a config class gets that class built from
the sources; a flow taking a plain dict gets the YAML mapping with `--set` values.
"""

from __future__ import annotations

from typing import Any

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config, load_plain
from alignflow.flows.loader import canonical_ref, load_flow


def build_config(ref: str, config_file: str | None, sets: list[str], flags: list[str]) -> Any:
    """The config object for `alignflow run REF ...`; `ConfigError` in one line when bad."""
    _flow, cls = load_flow(canonical_ref(ref))
    if cls is not None:
        return load_config(cls, config_file=config_file, sets=sets, flags=flags)
    if flags:
        raise ConfigError(f"unknown flag {flags[0]!r}: flow {ref!r} takes a plain dict config; "
                          "use --set KEY=VALUE")
    return load_plain(config_file, sets)
