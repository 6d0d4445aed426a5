"""`alignflow translate SCRIPT.sh`: the alignflow command (and YAML) an OpenRLHF launch
script becomes, with one line per flag that changes meaning or is not supported.

The command keeps the script's flags (alignflow reads both OpenRLHF generations) except
those without a key here (`gaps.py`): each of those is dropped with a comment saying why.
The YAML spells every key with its resolved value, OpenRLHF's defaults included, so it
means the same without the rule that picks defaults.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from alignflow.flows.compat import argv, notes, profile
from alignflow.flows.compat.script import Launch
from alignflow.flows.config import dump_yaml, resolve_config
from alignflow.flows.loader import load_flow


@dataclass(frozen=True)
class Translation:
    flow: str
    command: list[str]  # argv of `alignflow run ...`
    yaml: str
    lines: list[str]  # one per dropped flag, meaning change or note


def translate(launch: Launch) -> Translation:
    _fn, cls = load_flow(launch.flow)
    is_key = argv.key_test(cls)
    found = argv.sort_argv(launch.flags, [], is_key=is_key)
    chosen = profile.choose(launch.flow, launch.flags)
    kept = _without_gaps(launch.flags, is_key)
    base = profile.base_overrides(chosen, cls) | profile.legacy_lengths(found.flags)
    resolved = resolve_config(cls, flags=found.flags, base=base)
    config = profile.settle(chosen, resolved.config, resolved.origins)
    lines = [f"dropped {p}" for p in found.problems] + [f"note: {n}" for n in found.notes]
    lines += [f"note: {n}" for n in notes.notes(chosen, config)]
    if found.env:
        lines.append("note: the W&B key moves to WANDB_API_KEY (never into the run's config)")
    seed = profile.run_seed(chosen, found.seed)
    command = ["alignflow", "run", launch.flow, *kept]
    if "--seed" not in kept and seed:
        command += ["--seed", str(seed)]
    return Translation(launch.flow, command, dump_yaml(config), lines)


def _without_gaps(flags: list[str], is_key) -> list[str]:
    """The flags minus those `gaps.py` has (with their values), and minus a W&B key."""
    out, skipping = [], False
    for token in flags:
        if token.startswith("--"):
            name = token[2:].split("=", 1)[0]
            skipping = argv.gap_of(name, is_key) is not None
            if name in ("use_wandb", "logger.wandb.key"):
                out.append(token.split("=", 1)[0])
                out.append("true")
                skipping = True
                continue
        if not skipping:
            out.append(token)
    return out


def render(tr: Translation) -> str:
    """The command (one flag per line), its lines as comments, then the YAML."""
    parts, line = [], []
    for token in tr.command:
        if token.startswith("--") and line:
            parts.append(" ".join(shlex.quote(t) for t in line))
            line = []
        line.append(token)
    parts.append(" ".join(shlex.quote(t) for t in line))
    text = " \\\n    ".join(parts)
    comments = "".join(f"# {line}\n" for line in tr.lines)
    return (f"{comments}{text}\n\n# or, as a config file (alignflow run {tr.flow} --config "
            f"FILE --defaults alignflow):\n{tr.yaml}")
