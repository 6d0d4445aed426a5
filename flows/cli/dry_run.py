"""`alignflow run FLOW ... --dry-run`: the resolved config, every key with its value and
where the value came from (a default — alignflow's or OpenRLHF's —, the YAML file, `--set`,
a flag, an alias), printed after every check has passed; nothing is started or written.
Then the run's plan and, where it has GPUs, each GPU's memory peak by phase
(`tasks/plan/memory/`): the plan shown carries that memory plan, so a GPU over its memory
(`--gpu-memory`, 80 GiB assumed) is refused after the report like a plan Ray cannot place.
Last, an RL run's work (prompts, samples, tokens per iteration, iterations) and a rough time
on this machine, with a `note:` when that is days (`work_size.py`)."""

from __future__ import annotations

from typing import Any

from alignflow.flows.config import config_fields, to_dict
from alignflow.flows.config.lookup import value_at
from alignflow.flows.config.types import config_paths
from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.memory.build import with_memory
from alignflow.tasks.plan.table import fit_lines, plan_table


def origin_of(path: str, origins: dict[str, str], paths: set[str]) -> str:
    """Where `path`'s value came from: its own source, a section's above it, or a default.
    A flag or `--set` key that is not the key itself is marked as an alias."""
    head = path
    while head:
        if head in origins:
            return _named(origins[head], head, paths)
        head = head.rpartition(".")[0]
    return "default"


def _named(origin: str, key: str, paths: set[str]) -> str:
    spelled = origin.removeprefix("--set ").removeprefix("--")
    if origin.startswith("-") and spelled.replace("-", "_") not in paths:
        return f"{origin} (alias of {key})"
    return origin


def format_dry_run(flow: str, checked: Any, executor: str) -> str:
    """The dry run's report: one line per key, the run's plan, then the notes."""
    if checked.cls is None:  # a user flow taking a plain dict
        return (f"{flow}: the config checks out (dry run: nothing started, nothing written); "
                f"run seed {checked.seed}\n  config = {checked.config!r}")
    paths = set(config_paths(checked.cls))
    rows = []
    for f in config_fields(checked.cls):
        value = _value(checked.config, f.path)
        rows.append((f.path, repr(to_dict(value)), origin_of(f.path, checked.origins, paths)))
    width = max(len(r[0]) for r in rows)
    vwidth = min(max(len(r[1]) for r in rows), 40)
    lines = [f"{flow}: the config checks out (dry run: nothing started, nothing written); "
             f"run seed {checked.seed}"]
    lines += [f"  {k.ljust(width)} = {v.ljust(vwidth)}  # {o}" for k, v, o in rows]
    if checked.plan is not None:
        lines += plan_table(checked.plan, executor)
        checked.plan = planned_memory(checked)
        memory = checked.plan.memory
        if memory is not None:
            lines += memory.table()
        if checked.plan.fit_problem() is None:  # else refused after the report
            lines += fit_lines(checked.plan)
            # an assumed GPU size on a cluster not described here: said, not refused
            lines += [f"note: {p}" for p in (memory.problems if memory else ())]
    lines += size_lines(checked)
    lines += [f"note: {n}" for n in checked.notes]
    return "\n".join(lines)


def size_lines(checked: Any) -> list[str]:
    """The work's size and a rough time on this machine (`work_size.py`); RL flows only."""
    from alignflow.flows.cli.speed import machine_speed
    from alignflow.flows.cli.work_size import work_lines, work_of

    work = work_of(checked)
    return work_lines(work, machine_speed()) if work is not None else []


def planned_memory(checked: Any) -> Any:
    """The checked run's plan with each GPU's memory peak (`tasks/plan/memory/`), read from
    its config's keys and its models' config.json (a folder, the Hub cache, or a published
    config the memory model lists); unchanged without GPUs or when it has one already."""
    plan = checked.plan
    if plan.memory is not None or not plan.gpus:
        return plan
    from alignflow.tasks.zoo.registry import model_config

    ask = MemoryAsk.of(lambda key: value_at(checked.config, key), read=model_config,
                       kind=getattr(checked.cls, "KIND", ""))
    return with_memory(plan, ask)


def _value(cfg: Any, path: str) -> Any:
    return value_at(cfg, path)
