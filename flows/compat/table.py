"""The flag table of `docs/openrlhf.md`: every flag of every OpenRLHF training CLI in every
release 0.5 → 0.11, the alignflow key it sets, its status and meaning. Built by the one rule
`alignflow run` applies (`rules.decide` on the flow's config class) and from the keys' own
help, so the document cannot promise what the command line does not do;
`tests/fast/test_openrlhf_flags.py` checks the document against it.

Regenerate: `python -m alignflow.flows.compat.table --write docs/openrlhf.md`.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path

from alignflow.flows.compat import defaults, era, reference, rules
from alignflow.flows.config import config_fields
from alignflow.flows.config.types import config_paths
from alignflow.flows.loader import config_class_of

FLOW_OF_CLI = {"train_ppo_ray": "grpo", "train_ppo": "grpo", "train_sft": "sft",
               "train_dpo": "dpo", "train_rm": "rm", "train_kd": "distill", "train_kto": "kto",
               "train_prm": "prm"}
STATUS = {"key": "same", "switch": "sets", "era": "its release's", "seed": "run seed",
          "inert": "no effect", "missing": "refused"}
BEGIN, END = "<!-- flag table: begin (generated) -->", "<!-- flag table: end -->"


@functools.cache
def _keys(flow: str) -> tuple[dict[str, object], dict[str, str]]:
    """(the flow's dotted key paths, the help text of each key)."""
    cls = config_class_of(flow)
    return config_paths(cls), {f.path: f.help for f in config_fields(cls)}


def row(flag: reference.Flag) -> tuple[str, str, str, str, str]:
    """(flag, releases, key, status, meaning) of one flag, as `alignflow run` decides it."""
    paths, helps = _keys(FLOW_OF_CLI[flag.cli])
    decision = rules.decide(flag, paths)
    status = STATUS[decision.kind]
    if decision.kind == "key" and decision.keys != (flag.name,):
        status = "renamed"
    keys = ", ".join(f"`{k}`" for k in decision.keys) if decision.kind in ("key", "switch") \
        else ""
    if decision.kind == "switch":
        keys += f" = `{decision.value}`"
    elif decision.kind in ("missing", "inert") and decision.keys:
        keys = f"none (`{decision.keys[0]}`)"
    meaning = {"key": helps.get(decision.keys[0], "") if decision.keys else "",
               "era": era.MEANING.get(flag.name, ""), "seed": "every task's seed derives from it",
               "switch": helps.get(decision.keys[0], "") if decision.keys else ""}.get(
        decision.kind, decision.reason)
    if decision.kind == "missing":
        meaning += f" (accepted at OpenRLHF's default, `{flag.default}`)"
    releases = f"{flag.first}–{flag.last}" + (f" (not {flag.absent})" if flag.absent else "")
    return f"`--{flag.name}`", releases, keys, status, meaning


def differences() -> list[str]:
    """The keys whose default differs from OpenRLHF's, with the reason (`defaults.py`)."""
    out = ["### Defaults that differ from OpenRLHF's", "", "| flow | key | why |", "|---|---|---|"]
    for (flow, key), why in sorted(defaults.DIFFERENT.items(), key=lambda i: (i[0][1], i[0][0])):
        shown = "every flow" if flow == "*" else f"`{flow}`"
        out.append(f"| {shown} | `{key}` | {why} |")
    return out


def render() -> str:
    """The differences, then the flag tables, one per CLI."""
    out: list[str] = differences()
    for cli, flow in FLOW_OF_CLI.items():
        out += ["", f"### {cli} (flow `{flow}`"
                    f"{' and the other RL flows' if flow == 'grpo' else ''})", "",
                "| flag | releases | alignflow key | status | meaning |", "|---|---|---|---|---|"]
        for flag in reference.of_cli(cli).values():
            cells = [c.replace("|", "/").replace("\n", " ") for c in row(flag)]
            out.append("| " + " | ".join(cells) + " |")
    return "\n".join(out).strip() + "\n"


def splice(document: str, table: str) -> str:
    """`document` with the text between the markers replaced by `table`."""
    head, _, rest = document.partition(BEGIN)
    _old, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{table}\n{END}{tail}"


def main(args: list[str]) -> int:
    table = render()
    if args[:1] == ["--write"] and len(args) == 2:
        path = Path(args[1])
        path.write_text(splice(path.read_text(), table))
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
