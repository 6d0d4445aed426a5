"""`alignflow translate SCRIPT.sh`: the alignflow command (and YAML) an OpenRLHF launch
script becomes, with one line per flag that is dropped or said out loud.

The command keeps the script's flags (alignflow reads every OpenRLHF release's) except
those it refuses or that have no effect here: each of those is dropped with a comment
saying why. The YAML spells every key with its resolved value.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Any

from alignflow.errors import ConfigError
from alignflow.flows.compat import argv, notes
from alignflow.flows.compat.script import Launch
from alignflow.flows.config import dump_yaml, resolve_config
from alignflow.flows.config.tokens import groups
from alignflow.flows.loader import config_class_of


@dataclass(frozen=True)
class Translation:
    flow: str
    command: list[str]  # argv of `alignflow run ...`
    yaml: str
    lines: list[str]  # one per dropped flag, meaning change or note


def translate(launch: Launch) -> Translation:
    cls = config_class_of(launch.flow)
    found = argv.sort(cls, launch.flags, [], builtin=True, ignore_hardware=False)
    config, refused = _resolve(cls, found)
    found.problems += refused
    lines = [f"dropped {p}" for p in found.problems] + [f"note: {n}" for n in found.notes]
    lines += [f"note: {n}" for n in notes.notes(config)]
    lines += [f"note: `{r}` is a shell redirection, not a flag: left out (add it back to the "
              "command to keep the log)" for r in launch.dropped]
    if found.env:
        lines.append("note: the W&B key moves to WANDB_API_KEY (never into the run's config)")
    command = ["alignflow", "run", launch.flow, *_kept(launch.flags, found)]
    return Translation(launch.flow, command, dump_yaml(config), lines)


def _resolve(cls: type, found: argv.Sorted) -> tuple[Any, list[str]]:
    """The config of every flag the loader takes, and one line per flag it refuses (that
    flag alone, with its own error): a script with several bad values lists them all."""
    try:
        return resolve_config(cls, flags=found.flags).config, []
    except ConfigError:
        pass
    kept: list[str] = []
    refused = []
    for name, values, eq in groups(found.flags):
        tokens = ([f"--{name}={values[0]}"] if eq else [f"--{name}", *values]) if name \
            else values
        try:
            resolve_config(cls, flags=kept + tokens)
            kept += tokens
        except ConfigError as exc:
            shown = found.spelled.get(f"--{name}", f"--{name} {' '.join(values)}".rstrip())
            refused.append(f"{shown}: {str(exc).splitlines()[0]}")
    found.flags = kept
    return resolve_config(cls, flags=kept).config, refused


def _kept(flags: list[str], found: argv.Sorted) -> list[str]:
    """The script's flags minus the dropped ones (with their values), and minus a W&B key."""
    out, dropped = [], {line.split(" ", 1)[0].split(":", 1)[0] for line in
                        found.problems + found.notes if line.startswith("--")}
    for name, values, eq in groups(flags):
        if name in argv.WANDB_KEY_FLAGS:
            out += [f"--{name}", "true"]
        elif name and f"--{name}" not in dropped:
            out += [f"--{name}={values[0]}"] if eq else [f"--{name}", *values]
        elif not name:
            out += values
    return out


def render(tr: Translation) -> str:
    """The command (one flag per line), its lines as comments, then the YAML."""
    parts: list[str] = []
    line: list[str] = []
    for token in tr.command:
        if token.startswith("--") and line:
            parts.append(" ".join(_quote(t) for t in line))
            line = []
        line.append(token)
    parts.append(" ".join(_quote(t) for t in line))
    text = " \\\n    ".join(parts)
    comments = "".join(f"# {line}\n" for line in tr.lines)
    return (f"{comments}{text}\n\n# or, as a config file (alignflow run {tr.flow} --config "
            f"FILE):\n{tr.yaml}")


def _quote(token: str) -> str:
    """Shell quoting that leaves `$(...)` and `${VAR}` for the shell to fill in."""
    if "$" in token and not any(c in token for c in "\"`\\"):
        return f'"{token}"'
    return shlex.quote(token)
