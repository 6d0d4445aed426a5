"""The config of `alignflow run FLOW [--config FILE] [--set KEY=VALUE]... [--flags]`, checked
whole before anything starts.

A built-in flow's command line is sorted first (OpenRLHF flags of any release onto its
keys, the ones it has no key for as problems or notes: `flows/compat/argv.py`), the config
resolved once on alignflow's defaults with every problem collected, then the run's plan made
for this machine (`tasks/plan/`: hosts, GPUs, engines, executor) and what the config names
checked (the plan's models, data, rewards; `preflight.py`). All problems are raised
together, one line each, before Ray starts or the store is touched. A flow whose first
parameter is annotated with a config class gets that class built from the sources; a flow
taking a plain dict gets the YAML mapping with `--set` values.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from alignflow.errors import ConfigError, ConfigProblems
from alignflow.flows import registry
from alignflow.flows.cli.data_notes import prompt_column_notes
from alignflow.flows.cli.eval_source import eval_from_training
from alignflow.flows.cli.no_reward import no_reward_problems
from alignflow.flows.compat import argv, notes
from alignflow.flows.config import load_plain, resolve_config
from alignflow.flows.control import planning
from alignflow.flows.control.api import DEFAULT_SEED
from alignflow.flows.loader import canonical_ref, load_flow
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.records import RunPlan


@dataclass
class CheckedRun:
    """A checked config, its run's plan (None for a flow whose config makes none) and what
    to say about them."""

    config: Any
    cls: type | None = None
    origins: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    seed: int = DEFAULT_SEED
    env: dict[str, str] = field(default_factory=dict)
    plan: RunPlan | None = None


OnConfig = Callable[[Any, RunPlan | None], None]


def check_run(ref: str, config_file: str | None, sets: list[str], flags: list[str], *,
              seed: int | None = None, ignore_hardware: bool = False, check: bool = True,
              on_config: OnConfig = lambda _config, _plan: None,
              cluster: Cluster | None = None) -> CheckedRun:
    """The config for `alignflow run REF ...`; `ConfigError` (one line per problem) when bad.
    `on_config` sees the config and its plan once resolved, before models and data are
    checked. The plan is made for `cluster` (default: this machine)."""
    _flow, cls = load_flow(canonical_ref(ref), named=True)
    if cls is None:
        if flags:
            raise ConfigError(f"unknown flag {flags[0]!r}: flow {ref!r} takes a plain dict "
                              "config; use --set KEY=VALUE")
        plain = load_plain(config_file, sets)
        on_config(plain, None)
        return CheckedRun(plain, seed=DEFAULT_SEED if seed is None else seed)
    builtin = ref in registry.BUILTIN
    found = argv.sort(cls, flags, sets, builtin, ignore_hardware)
    resolved, problems = _resolve_all(cls, config_file, found)
    eval_notes: list[str] = []
    if resolved is not None and builtin:
        resolved, eval_notes, more = eval_from_training(resolved)
        problems += more + no_reward_problems(resolved)
    plan = None
    if resolved is not None and not problems:
        plan = plan_here(resolved.config, cluster)
        on_config(resolved.config, plan)
    if resolved is not None and check and builtin:
        from alignflow.flows.cli.preflight import preflight

        problems += preflight(resolved.config, plan, machine=not ignore_hardware)
    if problems:
        raise problems_error(problems)
    origins = {k: found.spelled.get(o, o) for k, o in resolved.origins.items()}
    chosen = next(s for s in (seed, found.seed, DEFAULT_SEED) if s is not None)
    return CheckedRun(resolved.config, cls, origins,
                      found.notes + eval_notes + (notes.notes(resolved.config, plan)
                                                  + prompt_column_notes(resolved.config)
                                                  if builtin else []),
                      chosen, found.env, plan)


def plan_here(config: Any, cluster: Cluster | None = None) -> RunPlan | None:
    """The run's plan for `cluster` (default this machine; a named cluster's resources are
    read once the run has joined it: `flows/control/planning.py`), or None for a config that makes
    none."""
    if not isinstance(config, planning.Planned):
        return None
    plan = config.run_plan(cluster or Cluster.local())
    return plan if isinstance(plan, RunPlan) else None  # the built-in flows' plans


def _resolve_all(cls: type, config_file: str | None,
                 found: argv.Sorted) -> tuple[Any, list[str]]:
    """(the resolved config or None, every problem found on the way)."""
    problems, resolved = list(found.problems), None
    try:
        resolved = resolve_config(cls, config_file=config_file, sets=found.sets,
                                  flags=found.flags)
    except ConfigProblems as exc:
        problems += [str(p) for p in exc.problems]
    except ConfigError as exc:
        problems.append(str(exc))
    return resolved, problems


def problems_error(lines: list[str]) -> ConfigError:
    return ConfigError(lines[0]) if len(lines) == 1 else ConfigProblems(
        [ConfigError(line) for line in lines])


def build_config(ref: str, config_file: str | None, sets: list[str], flags: list[str]) -> Any:
    """Just the config of `alignflow run REF ...` (no data or model checks)."""
    return check_run(ref, config_file, sets, flags, check=False).config
