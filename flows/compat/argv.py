"""An `alignflow run` command line made of OpenRLHF flags of any release, turned into config
keys before the config loader sees it.

Each `--flag` is an alignflow key or alias (passed on), or a flag of the flow's OpenRLHF
CLIs in some release, spelled whole or as an unambiguous prefix (argparse's rule): it goes
where `rules.py` says. A switch for a value (`--bf16`) becomes that value
(`--ds.param_dtype=bf16`); a flag whose 0.11 key alignflow lacks is dropped, as a note when
it asks for nothing alignflow does differently (OpenRLHF's default, or an `INERT` key) and
as a problem otherwise. The release's own meanings (`era.py`) come last. The run seed
(`--seed`, `--train.seed`) and a W&B key (into the environment, never into the stored
config) are taken out here too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from alignflow.flows.compat import era, reference, rules
from alignflow.flows.config.sources import Keys
from alignflow.flows.config.tokens import groups, joined
from alignflow.flows.config.values import FALSE_WORDS, TRUE_WORDS

SEED_FLAGS = rules.SEED
WANDB_KEY_FLAGS = ("use_wandb", "logger.wandb.key")


@dataclass
class Sorted:
    flags: list[str] = field(default_factory=list)  # for the config loader
    sets: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seed: int | None = None
    env: dict[str, str] = field(default_factory=dict)
    spelled: dict[str, str] = field(default_factory=dict)  # "--key" given for "--flag"


def is_key(keys: Keys, name: str) -> bool:
    """Whether `name` is one of the config's keys or aliases."""
    return all(k in keys.paths for k in keys.canonical(name.replace("-", "_")))


def sort(cls: type, flags: list[str], sets: list[str], builtin: bool,
         ignore_hardware: bool) -> Sorted:
    """A built-in flow's command line with OpenRLHF's flags onto its keys; a user flow's as
    given. With `ignore_hardware`, what places work on GPUs is left out (`strip`)."""
    if not builtin:
        return Sorted(flags=list(flags), sets=list(sets))
    found = sort_argv(flags, sets, cls, getattr(cls, "OPENRLHF", ()))
    if ignore_hardware:
        strip(found, cls)
    return found


def sort_argv(flags: list[str], sets: list[str], cls: type, clis: tuple[str, ...]) -> Sorted:
    """The command line of a built-in flow whose config class is `cls` and whose OpenRLHF
    counterparts are `clis` (none for alignflow-only flows)."""
    keys, out = Keys.of(cls), Sorted(sets=list(sets))
    found = [(g, era.lookup(clis, g[0], prefix=not is_key(keys, g[0]))) for g in groups(flags)]
    at = era.generation(clis, [flag for _g, flag in found if flag is not None])
    for (name, values, _eq), flag in found:
        norm = name.replace("-", "_")
        if norm in SEED_FLAGS and values:
            out.seed = _seed(values[0], name, out)
        elif norm in WANDB_KEY_FLAGS and values and values[0].lower() not in TRUE_WORDS:
            out.env["WANDB_API_KEY"] = values[0]  # a secret: never into run.json
            out.flags += [f"--{name}", "true"]
        elif flag is not None and flag.name in era.OWN:
            continue  # their release's meaning: era.apply
        elif flag is not None and (why := rules.REFUSED_VALUES.get((flag.name, "".join(values)))):
            out.problems.append(f"--{name} {' '.join(values)}: {why}")
        elif flag is None or (is_key(keys, name) and not _switch(flag)):
            out.flags += ([f"--{name}"] if name else []) + values  # the loader's
        else:
            _openrlhf(flag, name, values, keys, at, out)
    era.apply(found, keys, at, out)
    return out


def _switch(flag: reference.Flag) -> bool:
    found = rules.target(flag.cli, flag.name)
    return found is not None and found.value is not None


def _openrlhf(flag: reference.Flag, name: str, values: list[str], keys: Keys,
              at: reference.Release, out: Sorted) -> None:
    """One OpenRLHF flag (`name` as typed) with its value tokens."""
    decision = rules.decide(flag, keys.paths)
    shown = f"--{name} {' '.join(values)}".rstrip()
    if decision.kind in ("key", "switch"):
        for key in decision.keys:
            value = decision.value
            out.flags += [f"--{key}", *values] if value is None else [f"--{key}={value}"]
            out.spelled[f"--{key}"] = f"--{name}"
    elif decision.kind == "inert":
        out.notes.append(f"{shown}: accepted, no effect: {decision.reason}")
    elif _is_default(flag, values, at):
        out.notes.append(f"{shown}: OpenRLHF's default, nothing to do (alignflow has no "
                         f"{decision.keys[0]}: {decision.reason})")
    else:
        out.problems.append(f"{shown}: {decision.reason or 'alignflow has no ' + decision.keys[0]}")


def _is_default(flag: reference.Flag, values: list[str], at: reference.Release) -> bool:
    """Whether the value given is OpenRLHF's default in the command line's release."""
    default = reference.value_of(flag.default_at(at))
    if flag.is_bool:  # a switch given asks for the other value, unless given `false`
        return bool(values) and values[0].lower() in FALSE_WORDS
    typed = [reference.value_of(v) for v in values]
    if isinstance(default, tuple | list):
        return list(default) == typed
    return len(typed) == 1 and (typed[0] == default or str(typed[0]) == str(default))


def _seed(text: str, name: str, out: Sorted) -> int | None:
    try:
        return int(text)
    except ValueError:
        out.problems.append(f"--{name} {text!r}: expected an integer seed")
        return None


# `--ignore-hardware`: run a GPU script on this machine. Flags and `--set` items that place
# work on GPUs, nodes, vLLM engines or DeepSpeed are left out, each with a note, so the run
# takes this machine's defaults for them (the keys themselves are ordinary config keys).
ROLES = ("actor", "critic", "ref", "reward", "placement")
HARDWARE = ("vllm.", "ds.zero_stage", "ds.adam_offload", "ds.overlap_comm", "ds.deepcompile",
            "ds.zpg", "ds.tensor_parallel_size", "ds.ring_attn_size", "ds.ring_attn_head_stride",
            "ds.use_universal_ckpt", "ds.enable_sleep", "ds.grad_accum_dtype", "ds.load_in_4bit",
            "ds.attn_implementation", "ds.trainer",
            *(f"{role}.num_{n}" for role in ROLES for n in ("nodes", "gpus_per_node", "gpus")))


def is_hardware(keys: Keys, name: str) -> bool:
    found = keys.canonical(name.replace("-", "_"))
    return bool(found) and all(k.startswith(HARDWARE) for k in found)


def strip(out: Sorted, cls: type) -> None:
    """Leave the hardware flags and `--set` items out of `out`, with a note each."""
    keys, kept = Keys.of(cls), []
    for group in groups(out.flags):
        name, values, _eq = group
        if name and is_hardware(keys, name):
            shown = out.spelled.get(f"--{name}")  # a switch of an older release: its name
            shown = shown or f"--{name} {' '.join(values)}".rstrip()
            out.notes.append(f"{shown}: ignored (--ignore-hardware): this machine's default "
                             "is used")
        else:
            kept += joined(group)
    out.flags = kept
    sets = [s for s in out.sets if not is_hardware(keys, s.partition("=")[0].strip())]
    out.notes += [f"--set {s}: ignored (--ignore-hardware)" for s in out.sets if s not in sets]
    out.sets = sets
