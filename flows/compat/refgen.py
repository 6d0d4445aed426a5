"""`openrlhf_flags.tsv` generated from the reference (`docs/reference/openrlhf-flags.md`:
every flag of every OpenRLHF release 0.5 → 0.11.2, read from OpenRLHF's own parsers).

One row per (CLI, flag) of the training CLIs: first and last release with it, releases in
between without it, its newest default, earlier defaults with the last release that had
each, what it was renamed to, and the reference's note. Nothing here is written by hand:
`tests/fast/test_openrlhf_flags.py` fails when the table is not what the reference gives.

Regenerate: `python -m alignflow.flows.compat.refgen --write`.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference" / "openrlhf-flags.md"
TSV = Path(__file__).with_name("openrlhf_flags.tsv")
TRAINING = ("train_ppo_ray", "train_ppo", "train_sft", "train_rm", "train_dpo", "train_kd",
            "train_kto", "train_prm")
DOTTED_FROM, DOTTED_TO = "v0.10.2", "v0.11.2"
LATER = re.compile(r"new in (v0\.11\.[1-9][\w.]*)")  # a dotted flag added after v0.10.2
GONE = "removed in v0.11.2"  # the two IS-correction flags #1339 replaced: last in v0.11.0
COLUMNS = ("cli", "flag", "first", "last", "absent", "default", "earlier", "renamed", "note")
ROW = re.compile(r"^\| `--([^`]+)` \|(.*)\|\s*$")
EARLIER = re.compile(r"`([^`]*)` until (v[0-9][\w.]*)")
ABSENT = re.compile(r"absent (v[\w.]+)–(v[\w.]+)")
RENAMED = re.compile(r"`--([\w.\-]+)(?: ([^`]+))?`")


def _cells(line: str) -> list[str] | None:
    match = ROW.match(line)
    if not match:
        return None
    return [match.group(1)] + [c.strip() for c in match.group(2).split("|")]


def _plain(text: str) -> str:
    """A default as the reference shows it, without the markdown quoting."""
    return text.strip().strip("`")


def _earlier(note: str) -> str:
    """`"test"` until v0.6.4, then ... -> 'test<=v0.6.4 ...' (value, last release with it)."""
    head = note.split("earlier default", 1)
    if len(head) < 2:
        return ""
    return " ".join(f"{v}<={until}" for v, until in EARLIER.findall(head[1]))


def _renamed(note: str, flag: str) -> str:
    """The flag(s) it became, `name=value` when the rename fixed a value; '' when none."""
    if note.startswith("same name"):
        return flag
    if "→" not in note:
        return ""
    clause = re.split(r"\(|;| = ", note.rsplit("→", 1)[1], maxsplit=1)[0]
    out = []
    for name, value in RENAMED.findall(clause):
        out.append(f"{name}={value.strip()}" if value else name)
    return " ".join(out)


def _sections(text: str):
    """(cli, dotted, cells) for every table row of a training CLI."""
    cli, dotted = None, False
    for line in text.splitlines():
        if line.startswith("## "):
            dotted = line.startswith("## Dotted")
        elif line.startswith("### "):
            name = line[4:].split()[0]
            cli = name if name in TRAINING else None
        elif cli and (cells := _cells(line)):
            yield cli, dotted, cells


def rows(text: str) -> list[dict[str, str]]:
    """The table's rows, in the reference's order (flat releases, then the dotted ones)."""
    found: dict[tuple[str, str], dict[str, str]] = {}
    for cli, dotted, cells in _sections(text):
        if dotted:
            flag, default, pred, note = cells[:4]
            later = LATER.search(pred)
            flat = found.get((cli, flag))  # the same name in the flat releases
            row = flat or {"cli": cli, "flag": flag, "absent": "", "earlier": "",
                           "first": later.group(1) if later else DOTTED_FROM,
                           "renamed": flag, "note": note}
            if flat is not None and row["default"] != _plain(default):
                row["earlier"] = " ".join(filter(None, [row["earlier"],
                                                         f"{row['default']}<={row['last']}"]))
            row.update(last="v0.11.0" if note.startswith(GONE) else DOTTED_TO,
                       default=_plain(default))
        else:
            flag, first, last, default, note = cells[:5]
            absent = ABSENT.search(note)
            row = {"cli": cli, "flag": flag, "first": first, "last": last,
                   "absent": "-".join(absent.groups()) if absent else "",
                   "default": _plain(default), "earlier": _earlier(note),
                   "renamed": _renamed(note, flag), "note": note}
        found[(cli, flag)] = row
    return list(found.values())


def render(table: list[dict[str, str]]) -> str:
    """Tab-separated, one row per line (no cell holds a tab or a newline)."""
    lines = ["\t".join(COLUMNS)] + ["\t".join(row[c] for c in COLUMNS) for row in table]
    return "\n".join(lines) + "\n"


def main(args: list[str]) -> int:
    text = render(rows(REFERENCE.read_text()))
    if args == ["--write"]:
        TSV.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
