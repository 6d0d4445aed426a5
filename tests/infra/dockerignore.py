"""What `docker build` sends as its context, computed without a Docker daemon: the
.dockerignore rules as Docker's pattern matcher (moby/patternmatcher) reads them.

A line is a pattern (`#` comments and blank lines skipped, a leading `/` and `./` dropped,
the path cleaned); `*` matches within one path segment, `?` one character of it, `**` any
number of segments (none too); `!` re-includes. A path is excluded when the last pattern
that matches it, or one of its parent folders, is not a `!` pattern.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Rule:
    regex: re.Pattern
    include: bool  # a `!` pattern


def _regex(pattern: str) -> re.Pattern:
    out, i = "^", 0
    while i < len(pattern):
        ch = pattern[i]
        if pattern.startswith("**", i):
            i += 2
            if pattern[i:i + 1] == "/":
                i += 1
            out += ".*" if i >= len(pattern) else "(.*/)?"
            continue
        if ch == "*":
            out += "[^/]*"
        elif ch == "?":
            out += "[^/]"
        elif ch == "\\" and i + 1 < len(pattern):
            i += 1
            out += re.escape(pattern[i])
        elif ch == "[":
            end = pattern.find("]", i + 1)
            out += pattern[i:end + 1] if end > 0 else re.escape(ch)
            i = end if end > 0 else i
        else:
            out += re.escape(ch)
        i += 1
    return re.compile(out + "$")


def rules(text: str) -> list[Rule]:
    found = []
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        include = line.startswith("!")
        pattern = posixpath.normpath(line[1:].strip() if include else line).lstrip("/")
        found.append(Rule(_regex(pattern.removeprefix("./")), include))
    return found


def excluded(path: str, found: list[Rule]) -> bool:
    """Whether the context leaves out `path` (relative, `/`-separated)."""
    parts = path.split("/")
    prefixes = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
    verdict = False
    for rule in found:
        if any(rule.regex.match(p) for p in prefixes):
            verdict = not rule.include
    return verdict


def context_files(root: Path, found: list[Rule]) -> Iterator[tuple[str, int]]:
    """(path, bytes) of every file the context holds; an excluded folder is not walked
    when no `!` rule could bring part of it back."""
    negations = any(r.include for r in found)
    for folder, dirs, files in os.walk(root):
        rel = Path(folder).relative_to(root).as_posix()
        rel = "" if rel == "." else rel + "/"
        dirs[:] = [d for d in dirs if negations or not excluded(rel + d, found)]
        for name in files:
            path = Path(folder) / name
            if not excluded(rel + name, found) and not path.is_symlink():
                yield rel + name, path.stat().st_size
