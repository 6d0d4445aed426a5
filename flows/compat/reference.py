"""OpenRLHF's command lines as data: every flag of its training CLIs in every release from
0.5 to 0.11.2 (`openrlhf_flags.tsv`, generated from the reference by `refgen.py`), with the
releases that had it, its default in each and what it was renamed to.

A release is compared as a tuple: `release("v0.9.1.post1") == (0, 9, 1, 1)`.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

from alignflow.flows.compat.refgen import COLUMNS, TSV

Release = tuple[int, ...]
NEWEST = "v0.11.2"


def release(text: str) -> Release:
    """`v0.9.1.post1` -> (0, 9, 1, 1); `v0.9.1` -> (0, 9, 1, 0)."""
    head, _, post = text.lstrip("v").partition(".post")
    return (*(int(p) for p in head.split(".")), int(post or 0))


@dataclass(frozen=True)
class Flag:
    """One flag of one OpenRLHF CLI, over every release that had it."""

    cli: str
    name: str  # without the leading dashes
    first: str
    last: str
    absent: str  # "vA-vB": releases in between without it
    default: str  # in its newest release, as the parser has it ("None", "(0.9, 0.95)", ...)
    earlier: str  # "value<=vX ...": older defaults, each with the last release that had it
    renamed: str  # what it became ("algo.kl.init_coef", "param_dtype=bf16", "a b"); "" none
    note: str  # the reference's note

    def present(self, at: Release) -> bool:
        """Whether OpenRLHF's parser had this flag in release `at`."""
        if not release(self.first) <= at <= release(self.last):
            return False
        low, _, high = self.absent.partition("-")
        return not (low and release(low) <= at <= release(high))

    def default_at(self, at: Release) -> str:
        """The default's text in release `at` (its newest one past the flag's last)."""
        for item in self.earlier.split():
            value, _, until = item.rpartition("<=")
            if at <= release(until):
                return value
        return self.default

    @property
    def is_bool(self) -> bool:
        """A switch (`store_true` / `store_false`): it takes no value."""
        return self.default in ("False", "True")


def value_of(text: str) -> object:
    """A default's text as a Python value (`"train"` -> 'train', `(0.9, 0.95)`, `1e8`,
    `int(1e8)`, `float("inf")`); text that is no literal (`—`, `required`) stays text."""
    text = text.strip()
    for wrap, cast in (("int(", int), ("float(", float)):
        if text.startswith(wrap) and text.endswith(")"):
            inner = value_of(text[len(wrap):-1])
            return cast(inner) if isinstance(inner, int | float | str) else inner
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


@functools.cache
def flags() -> tuple[Flag, ...]:
    lines = TSV.read_text().splitlines()
    assert tuple(lines[0].split("\t")) == COLUMNS, "openrlhf_flags.tsv: unexpected header"
    return tuple(Flag(*line.split("\t")) for line in lines[1:])


@functools.cache
def of_cli(cli: str) -> dict[str, Flag]:
    """The flags of one CLI, by name."""
    return {f.name: f for f in flags() if f.cli == cli}


# The releases the reference reads (the last of each minor line, v0.9.0 and the last flat
# one); with each CLI's last release, the generations a command line is placed in.
SAMPLED = ("v0.5.9.post1", "v0.6.4", "v0.7.5", "v0.8.11", "v0.9.0", "v0.9.10",
           "v0.10.1.post2", "v0.10.4", "v0.11.0", "v0.11.2")


@functools.cache
def generations(cli: str) -> tuple[Release, ...]:
    """The releases a command line of `cli` can belong to, newest first."""
    last = max(release(f.last) for f in of_cli(cli).values())
    found = {release(r) for r in SAMPLED if release(r) <= last} | {last}
    return tuple(sorted(found, reverse=True))
