"""`alignflow run FLOW ... --dry-run`: the resolved config, every key with its value and
where the value came from (a default — alignflow's or OpenRLHF's —, the YAML file, `--set`,
a flag, an alias), printed after every check has passed; nothing is started or written."""

from __future__ import annotations

from typing import Any

from alignflow.flows.config import config_fields, to_dict
from alignflow.flows.config.types import config_paths


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


def format_dry_run(flow: str, plan: Any) -> str:
    """The dry run's report: one line per key, then the notes."""
    if plan.cls is None:  # a user flow taking a plain dict
        return (f"{flow}: the config checks out (dry run: nothing started, nothing written); "
                f"run seed {plan.seed}\n  config = {plan.config!r}")
    paths = set(config_paths(plan.cls))
    rows = []
    for f in config_fields(plan.cls):
        value = _value(plan.config, f.path)
        rows.append((f.path, repr(to_dict(value)), origin_of(f.path, plan.origins, paths)))
    width = max(len(r[0]) for r in rows)
    vwidth = min(max(len(r[1]) for r in rows), 40)
    lines = [f"{flow}: the config checks out (dry run: nothing started, nothing written); "
             f"run seed {plan.seed}"]
    lines += [f"  {k.ljust(width)} = {v.ljust(vwidth)}  # {o}" for k, v, o in rows]
    lines += [f"note: {n}" for n in plan.notes]
    return "\n".join(lines)


def _value(cfg: Any, path: str) -> Any:
    for part in path.split("."):
        cfg = getattr(cfg, part, None)
    return cfg
