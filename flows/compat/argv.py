"""Sorting an `alignflow run` command line before the config loader sees it: OpenRLHF flags
without a config key (`gaps.py`: problems or notes, one line each), the run seed
(`--train.seed`), and a W&B key, which goes to the environment instead of the run's stored
config."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from alignflow.flows.compat.gaps import Gap, gap
from alignflow.flows.config.sources import Keys
from alignflow.flows.config.values import TRUE_WORDS

SEED_FLAGS = ("train.seed", "seed")
WANDB_KEY_FLAGS = ("use_wandb", "logger.wandb.key")


@dataclass
class Sorted:
    flags: list[str] = field(default_factory=list)  # for the config loader
    sets: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seed: int | None = None
    env: dict[str, str] = field(default_factory=dict)


def _groups(tokens: list[str]) -> list[tuple[str, list[str], bool]]:
    """(name, value tokens, had '=') per `--flag`; stray tokens keep their own group."""
    out: list[tuple[str, list[str], bool]] = []
    for token in tokens:
        if token.startswith("--") and len(token) > 2:
            name, eq, value = token[2:].partition("=")
            out.append((name, [value] if eq else [], bool(eq)))
        elif out and not out[-1][2]:
            out[-1][1].append(token)
        else:
            out.append(("", [token], False))
    return out


def key_test(cls: type) -> Callable[[str], bool]:
    """Whether a flag or key name is one of `cls`'s keys or aliases (then it is no gap)."""
    keys = Keys.of(cls)
    return lambda name: all(k in keys.paths for k in keys.canonical(name.replace("-", "_")))


def gap_of(name: str, is_key: Callable[[str], bool]) -> Gap | None:
    return None if is_key(name) else gap(name)


def _finding(display: str, value: str, is_key: Callable[[str], bool], ignore_hardware: bool,
             out: Sorted) -> bool:
    """Record the gap of `display` (a flag or key) set to `value`; False if it has none.
    With --ignore-hardware, a hardware flag that is a key by now (GPUs, vLLM, DeepSpeed) is
    left out too: the run takes this machine's defaults for it."""
    name = display.lstrip("-")
    hardware = gap(name)
    if ignore_hardware and hardware is not None and hardware.kind == "hardware" and \
            is_key(name) and not hardware.accepts(value):
        out.notes.append(f"{display} {value}: ignored (--ignore-hardware): this machine's "
                         "default is used")
        return True
    entry = gap_of(name, is_key)
    if entry is None:
        return False
    if entry.accepts(value):
        if entry.kind == "inert":
            out.notes.append(f"{display} {value}: accepted, no effect: {entry.reason}")
        return True
    line = f"{display} {value}: {entry.reason}"
    if entry.kind == "inert" or (entry.kind == "hardware" and ignore_hardware):
        out.notes.append(line + (" (ignored: --ignore-hardware)" if entry.kind == "hardware"
                                 else ""))
    else:
        out.problems.append(line)
    return True


def sort_argv(flags: list[str], sets: list[str], *, is_key: Callable[[str], bool],
              ignore_hardware: bool = False) -> Sorted:
    out = Sorted()
    for name, values, _eq in _groups(flags):
        norm = name.replace("-", "_")
        value = " ".join(values) if values else "true"
        if norm in SEED_FLAGS and values:
            out.seed = _seed(values[0], name, out)
        elif norm in WANDB_KEY_FLAGS and values and values[0].lower() not in TRUE_WORDS:
            out.env["WANDB_API_KEY"] = values[0]  # a secret: never into run.json
            out.flags += [f"--{name}", "true"]
        elif not name or not _finding(f"--{name}", value, is_key, ignore_hardware, out):
            out.flags += ([f"--{name}"] if name else []) + values
    for item in sets:
        key, _eq, value = item.partition("=")
        if not _finding(key.strip(), value, is_key, ignore_hardware, out):
            out.sets.append(item)
    return out


def _seed(text: str, name: str, out: Sorted) -> int | None:
    try:
        return int(text)
    except ValueError:
        out.problems.append(f"--{name} {text!r}: expected an integer seed")
        return None
