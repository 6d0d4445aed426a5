"""The flag table of `docs/openrlhf.md`: every flag of every OpenRLHF script alignflow stands
for (both generations), the alignflow key it sets and its status. Built from the same tables
the command line reads (`flows/aliases.py` through the config classes, `gaps.py`,
`argv.py`), so the document cannot promise what `alignflow run` does not do;
`tests/fast/test_openrlhf_table.py` checks the document against it.

Regenerate: `.venv/bin/python -m alignflow.flows.compat.table > /tmp/t && ` paste between
the markers (or `--write docs/openrlhf.md`).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from alignflow.flows.compat import argv, gaps, reference
from alignflow.flows.config.sources import Keys
from alignflow.flows.loader import load_flow

FLOW_OF_SCRIPT = {"train_ppo_ray": "grpo", "train_sft": "sft", "train_dpo": "dpo",
                  "train_rm": "rm", "train_kto": "kto", "train_prm": "prm"}
STATUS = {"hardware": "not on this machine", "unsupported": "not supported",
          "inert": "accepted, no effect"}
BEGIN, END = "<!-- flag table: begin (generated) -->", "<!-- flag table: end -->"


@dataclass(frozen=True)
class Row:
    script: str
    version: str
    flag: str
    key: str  # the alignflow key(s) it sets, or "" when none
    status: str  # same / mapped / not on this machine / not supported / accepted, no effect / unknown
    why: str


def row_of(flag: reference.Flag) -> Row:
    """Where one OpenRLHF flag goes in alignflow, as `alignflow run` decides it."""
    _fn, cls = load_flow(FLOW_OF_SCRIPT[flag.script])
    keys, name = Keys.of(cls), flag.name.replace("-", "_")
    target = keys.canonical(name)
    if all(k in keys.paths for k in target):
        status = "same" if target == (name,) else "mapped"
        return Row(flag.script, flag.version, flag.name, ", ".join(target), status, "")
    if name in argv.SEED_FLAGS:
        return Row(flag.script, flag.version, flag.name, "run seed (--seed)", "mapped", "")
    entry = gaps.gap(name)
    if entry is not None:
        return Row(flag.script, flag.version, flag.name, "", STATUS[entry.kind], entry.reason)
    return Row(flag.script, flag.version, flag.name, "", "unknown", "")


def rows() -> list[Row]:
    return [row_of(f) for f in reference.flags()]


def render(table: list[Row]) -> str:
    """The markdown table, one section per script and version."""
    out, current = [], None
    for r in table:
        if (r.script, r.version) != current:
            current = (r.script, r.version)
            out += ["", f"### {r.script} {r.version} (`alignflow run "
                        f"{FLOW_OF_SCRIPT[r.script]}`{' and the other RL flows' if r.script == 'train_ppo_ray' else ''})",
                    "", "| flag | alignflow key | status | why |", "|---|---|---|---|"]
        key = f"`{r.key}`" if r.key and not r.key.startswith("run seed") else r.key
        out.append(f"| `--{r.flag}` | {key} | {r.status} | {r.why.replace('|', '/')} |")
    return "\n".join(out).strip() + "\n"


def splice(document: str, table: str) -> str:
    """`document` with the text between the markers replaced by `table`."""
    head, _, rest = document.partition(BEGIN)
    _old, _, tail = rest.partition(END)
    return f"{head}{BEGIN}\n\n{table}\n{END}{tail}"


def main(args: list[str]) -> int:
    table = render(rows())
    if args[:1] == ["--write"] and len(args) == 2:
        path = Path(args[1])
        path.write_text(splice(path.read_text(), table))
    else:
        sys.stdout.write(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
