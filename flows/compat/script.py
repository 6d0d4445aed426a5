"""Reading an OpenRLHF launch script: the `openrlhf.cli.<script>` call in it, its flags with
the shell variables filled in (from the environment, else the script's own
`NAME=${NAME:-default}` lines), and the built-in flow it stands for."""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass

from alignflow.errors import ConfigError

CALL = re.compile(r"openrlhf\.cli\.(train_\w+)")
VAR = re.compile(r"\$\{(\w+)(?::-([^}]*))?\}|\$(\w+)")
ASSIGN = re.compile(r"^\s*(?:export\s+)?(\w+)=(.*)$", re.S)  # a value may span lines
ARRAY = re.compile(r"\$\{(\w+)\[@\]\}")
ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")
ESTIMATOR_FLOW = {"gae": "ppo", "group_norm": "grpo", "dr_grpo": "dr_grpo", "rloo": "rloo",
                  "reinforce": "reinforce_pp", "reinforce_baseline": "reinforce_pp_baseline"}
SCRIPT_FLOW = {"train_sft": "sft", "train_dpo": "dpo", "train_rm": "rm", "train_kto": "kto",
               "train_prm": "prm"}


@dataclass(frozen=True)
class Launch:
    script: str  # train_ppo_ray, train_sft, ...
    flags: list[str]  # the argv tokens after the module

    @property
    def flow(self) -> str:
        """The built-in flow: by script, and for train_ppo_ray by the advantage estimator."""
        if self.script != "train_ppo_ray":
            if self.script not in SCRIPT_FLOW:
                raise ConfigError(f"openrlhf.cli.{self.script} has no alignflow flow; expected "
                                  f"train_ppo_ray or one of {sorted(SCRIPT_FLOW)}")
            return SCRIPT_FLOW[self.script]
        estimator = "gae"
        for i, token in enumerate(self.flags[:-1]):
            if token in ("--advantage_estimator", "--algo.advantage.estimator"):
                estimator = self.flags[i + 1]
        if estimator not in ESTIMATOR_FLOW:
            raise ConfigError(f"advantage estimator {estimator!r}: expected one of "
                              f"{sorted(ESTIMATOR_FLOW)}")
        return ESTIMATOR_FLOW[estimator]


def _expand(text: str, values: dict[str, str]) -> str:
    def one(match: re.Match) -> str:
        name = match.group(1) or match.group(3)
        if name in values:
            return values[name]
        return match.group(2) if match.group(2) is not None else ""
    return VAR.sub(one, ARRAY.sub(lambda m: values.get(m.group(1) + "[@]", ""), text))


def _ansi_c(text: str) -> str:
    """bash's $'...' quoting as a plain shell-quoted string (escapes decoded)."""
    def one(match: re.Match) -> str:
        decoded = match.group(1).encode().decode("unicode_escape")
        return shlex.quote(decoded)
    return ANSI_C.sub(one, text)


def _logical_lines(text: str) -> list[str]:
    """Lines with continuations joined, comments dropped and array bodies kept together."""
    lines, buffer = [], ""
    for raw in re.sub(r"\\\n", " ", text).splitlines():
        line = _ansi_c(raw.strip())  # after the split: a decoded \n is no line break
        if not buffer and (not line or line.startswith("#")):
            continue
        buffer = f"{buffer}\n{_ansi_c(raw)}" if buffer else line
        if buffer.count("(") <= buffer.count(")") and _quotes_closed(buffer):
            lines.append(buffer)
            buffer = ""
    return lines + ([buffer] if buffer else [])


def _quotes_closed(text: str) -> bool:
    """Whether `text` ends outside any quotes (a quoted value may span lines)."""
    try:
        shlex.split(text, comments=True)
    except ValueError:
        return False
    return True


def _assign(line: str, values: dict[str, str], fixed: set[str]) -> None:
    match = ASSIGN.match(line)
    if not match or match.group(1) in fixed:
        return
    name, value = match.group(1), match.group(2).strip()
    if value.startswith("("):  # an array: NAME=( --flag value ... )
        tokens = shlex.split(_expand(value[1:value.rindex(")")], values), comments=True)
        values[name + "[@]"] = " ".join(shlex.quote(t) for t in tokens)
    else:
        values[name] = _expand(shlex.split(value)[0] if value else "", values)


def read_launch(text: str, env: dict[str, str] | None = None) -> Launch:
    """The OpenRLHF call of a launch script: continuation lines joined, comments dropped,
    variables and arrays filled in."""
    values = dict(os.environ if env is None else env)
    fixed = set(values)
    for line in _logical_lines(text):
        found = CALL.search(line)
        if not found:
            _assign(line, values, fixed)
            continue
        tokens = shlex.split(_expand(line, values), comments=True)
        start = next(i for i, t in enumerate(tokens) if CALL.search(t)) + 1
        return Launch(found.group(1), tokens[start:])
    raise ConfigError("no `openrlhf.cli.train_*` call found in the script; expected a launch "
                      "command such as `python3 -m openrlhf.cli.train_ppo_ray --pretrain ...`")
