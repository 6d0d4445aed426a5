"""The config of `alignflow run FLOW [--config FILE] [--set KEY=VALUE]... [--flags]`, checked
whole before anything starts.

A built-in flow's command line is sorted first (OpenRLHF flags of any release onto its
keys, the ones it has no key for as problems or notes: `flows/compat/argv.py`), the config
resolved once on alignflow's defaults with every problem collected, and then what it names
checked (models, data, rewards; `preflight.py`). All problems are raised together, one
line each, before Ray starts or the store is touched. A flow whose first parameter is
annotated with a config class gets that class built from the sources; a flow taking a plain
dict gets the YAML mapping with `--set` values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from alignflow.errors import ConfigError, ConfigProblems
from alignflow.flows import registry
from alignflow.flows.compat import argv, notes
from alignflow.flows.config import load_plain, resolve_config
from alignflow.flows.loader import canonical_ref, load_flow

DEFAULT_SEED = 42  # OpenRLHF's --seed / --train.seed


@dataclass
class RunPlan:
    """A checked config and what to say about it."""

    config: Any
    cls: type | None = None
    origins: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seed: int = DEFAULT_SEED
    env: dict[str, str] = field(default_factory=dict)


def plan_run(ref: str, config_file: str | None, sets: list[str], flags: list[str], *,
             seed: int | None = None, ignore_hardware: bool = False, check: bool = True,
             on_config: Callable[[Any], None] = lambda _config: None) -> RunPlan:
    """The config for `alignflow run REF ...`; `ConfigError` (one line per problem) when bad.
    `on_config` sees the config once it is resolved, before its models and data are checked."""
    _flow, cls = load_flow(canonical_ref(ref), named=True)
    if cls is None:
        if flags:
            raise ConfigError(f"unknown flag {flags[0]!r}: flow {ref!r} takes a plain dict "
                              "config; use --set KEY=VALUE")
        plain = load_plain(config_file, sets)
        on_config(plain)
        return RunPlan(plain, seed=DEFAULT_SEED if seed is None else seed)
    builtin = ref in registry.BUILTIN
    found = argv.sort(cls, flags, sets, builtin, ignore_hardware)
    problems, resolved = list(found.problems), None
    try:
        resolved = resolve_config(cls, config_file=config_file, sets=found.sets,
                                  flags=found.flags)
    except ConfigProblems as exc:
        problems += [str(p) for p in exc.problems]
    except ConfigError as exc:
        problems.append(str(exc))
    if resolved is not None and not problems:
        on_config(resolved.config)
    if resolved is not None and check and builtin:
        from alignflow.flows.cli.preflight import preflight

        problems += preflight(resolved.config)
    if problems:
        raise problems_error(problems)
    origins = {k: found.spelled.get(o, o) for k, o in resolved.origins.items()}
    chosen = next(s for s in (seed, found.seed, DEFAULT_SEED) if s is not None)
    return RunPlan(resolved.config, cls, origins,
                   found.notes + (notes.notes(resolved.config) if builtin else []), chosen,
                   found.env)


def problems_error(lines: list[str]) -> ConfigError:
    return ConfigError(lines[0]) if len(lines) == 1 else ConfigProblems(
        [ConfigError(line) for line in lines])


def build_config(ref: str, config_file: str | None, sets: list[str], flags: list[str]) -> Any:
    """Just the config of `alignflow run REF ...` (no data or model checks)."""
    return plan_run(ref, config_file, sets, flags, check=False).config
