"""OpenRLHF's command lines as data: every flag of train_ppo_ray / train_sft / train_dpo /
train_rm at 0.11 (dotted) and v0.9.10 (flat), and of train_kto / train_prm at v0.9.5 (their
last release), with type, default and meaning (`openrlhf_flags.tsv`, read from OpenRLHF's
`openrlhf/cli/*.py`; the meanings are ours).

Which OpenRLHF script a built-in flow stands for is `SCRIPT_OF`; the loops have none.
"""

from __future__ import annotations

import csv
import functools
from dataclasses import dataclass
from pathlib import Path

TSV = Path(__file__).with_name("openrlhf_flags.tsv")

RL_FLOWS = ("grpo", "dr_grpo", "rloo", "reinforce_pp", "reinforce_pp_baseline", "ppo")
SCRIPT_OF: dict[str, str] = {
    **{flow: "train_ppo_ray" for flow in RL_FLOWS},
    "sft": "train_sft", "csft": "train_sft", "distill": "train_sft",
    "dpo": "train_dpo", "rm": "train_rm", "kto": "train_kto", "prm": "train_prm",
}
LATEST = {"train_kto": "0.9.5", "train_prm": "0.9.5"}  # removed after v0.9.5
FLAT = {"train_kto": "0.9.5", "train_prm": "0.9.5"}


@dataclass(frozen=True)
class Flag:
    """One flag of one OpenRLHF script at one version."""

    script: str
    version: str
    name: str  # without the leading dashes
    type: str  # int, float, str, flag, "float x2", "str list", ...
    default: str  # as OpenRLHF's parser has it ("None", "0.9 0.95", ...)
    meaning: str
    counterpart: str  # the other generation's spelling, or why there is none

    @property
    def is_bool(self) -> bool:
        return self.type.startswith("flag")


@functools.cache
def flags() -> tuple[Flag, ...]:
    with TSV.open(newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return tuple(Flag(r["script"], r["version"], r["flag"].lstrip("-"), r["type"],
                      r["default"].replace("\\n", "\n"), r["meaning"],
                      r["v0.9<->0.11 counterpart"]) for r in rows)


def versions(script: str) -> tuple[str, str]:
    """(dotted version, flat version) of a script: 0.11 / 0.9.10, or 0.9.5 / 0.9.5."""
    return LATEST.get(script, "0.11"), FLAT.get(script, "0.9.10")


@functools.cache
def names(script: str, version: str | None = None) -> frozenset[str]:
    """Flag names of `script` (at `version`, or at any version)."""
    return frozenset(f.name for f in flags()
                     if f.script == script and version in (None, f.version))


def script_flags(script: str, version: str) -> tuple[Flag, ...]:
    return tuple(f for f in flags() if f.script == script and f.version == version)
