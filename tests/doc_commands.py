"""The `alignflow` commands the documentation shows, as argv lists, so tests can run them.

Sources: README.md, docs/**/*.md, everything under infra/ (YAML, crontab, scripts), and the
examples' comments and docstrings. A command is `alignflow <COMMAND> ...` where COMMAND is
one of the CLI's (`alignflow.cli.COMMANDS`), found in a Markdown code span, a line of a
code block, a comment, a quoted string, a YAML `command:` list or a folded `entrypoint:`;
it ends where its span, string or line ends, or at a shell operator (`>>`, `|`, `&&`, `;`).

Usage notation is resolved as a reader would: `...` and `[optional parts]` are dropped,
`start|tick` is one command per alternative, and placeholders in capitals (`RUN_ID`,
`CONFIG`, `DIR`, ...) are kept for the caller to fill in (`fill`).
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from alignflow.cli import COMMANDS

ROOT = Path(__file__).resolve().parents[1]
_START = re.compile(r"(?<![\w.-])alignflow\s+(" + "|".join(COMMANDS) + r")\b")
_OPERATORS = (">>", ">", "|", "||", "&&", ";", "2>&1")


@dataclass(frozen=True)
class DocCommand:
    """One documented command: where it is (`file:line`) and its argv after `alignflow`."""

    where: str
    argv: tuple[str, ...]

    @property
    def command(self) -> str:
        return self.argv[0]


def sources() -> list[Path]:
    """Every file whose commands are checked."""
    found = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    found += sorted(p for p in (ROOT / "infra").rglob("*") if p.is_file())
    found += sorted(p for p in (ROOT / "examples").rglob("*") if p.suffix in (".py", ".yaml"))
    return found


def commands(paths: list[Path] | None = None) -> list[DocCommand]:
    """Every documented command of `paths` (default: `sources()`), in file order."""
    out: list[DocCommand] = []
    for path in paths or sources():
        text = path.read_text(errors="replace")
        rel = path.relative_to(ROOT)
        for line_no, snippet in _snippets(text, path.suffix):
            for argv in _expand(_words(snippet)):
                out.append(DocCommand(f"{rel}:{line_no}", argv))
    return out


def readme_runs() -> list[list[str]]:
    """The argv (from `run` on) of each `alignflow run` line of README.md."""
    return [list(c.argv) for c in commands([ROOT / "README.md"]) if c.command == "run"]


def _snippets(text: str, suffix: str) -> list[tuple[int, str]]:
    """(line number, text starting at `alignflow COMMAND` and ending where it ends) of the
    code spans of the prose and of the lines that are commands."""
    text = text.replace("\\\n", " ")  # shell continuations: one logical line
    prose = _comments(text, suffix) if suffix in (".yaml", ".yml", ".sh", "") else text
    found = []
    for ln, span in _spans(prose):
        match = _START.search(span)
        if match and span[:match.start()].strip().endswith(("", '"')):
            found.append((ln, _cut(span, match.start())))
    for line_no, line in enumerate(prose.splitlines(), 1):
        match = _START.search(line)
        if match and _is_command_line(line, match.start()):
            found.append((line_no, _cut(line, match.start())))
    if suffix in (".yaml", ".yml"):
        found += _yaml_commands(text)
    return found


def _comments(text: str, suffix: str) -> str:
    """A script's or YAML file's comments as prose (line numbers kept); a script's command
    lines (a crontab entry) are kept too."""
    out = []
    for line in text.splitlines():
        stripped = line.lstrip()
        if stripped.startswith("#"):
            out.append(stripped.lstrip("#")[1:] if stripped.startswith("# ") else stripped[1:])
        else:
            out.append(line if suffix not in (".yaml", ".yml") and "alignflow " in line else "")
    return "\n".join(out)


def _spans(prose: str) -> list[tuple[int, str]]:
    """Inline code spans (they may wrap), outside fenced code blocks."""
    fenced = re.sub(r"```.*?```", lambda m: "\n" * m.group().count("\n"), prose, flags=re.S)
    return [(fenced[:m.start()].count("\n") + 1, " ".join(m.group(1).split()))
            for m in re.finditer(r"(?<!`)`([^`]+)`(?!`)", fenced)]


def _is_command_line(line: str, start: int) -> bool:
    """A line that is a command (in a code block, a comment, a script): nothing but
    indentation, a path to the binary or `cd ... &&`-style shell before `alignflow`."""
    before = line[:start]
    return "`" not in before and (not before.strip() or before.rstrip().endswith(
        ("/", "&&", "--", ":", '"')))


def _cut(line: str, start: int) -> str:
    """The command starting at `start`: up to its closing quote, the end of the line, or a
    column-aligned note (two spaces and a parenthesis)."""
    rest = line[start:]
    for quote in ('"', "'"):
        if line[:start].count(quote) % 2 == 1 and quote in rest:
            rest = rest[:rest.index(quote)]
    return re.split(r"\s{2,}\(", rest)[0]


def _yaml_commands(text: str) -> list[tuple[int, str]]:
    """`command: [alignflow, ...]` lists and folded `entrypoint:` strings."""
    found = []
    for doc in yaml.safe_load_all(text):
        for key, value in _items(doc):
            if key == "command" and isinstance(value, list) and value[:1] == ["alignflow"]:
                found.append((0, shlex.join(value)))
            elif key == "entrypoint" and isinstance(value, str) and _START.match(value.strip()):
                found.append((0, value.strip()))
    return found


def _items(node: object):
    if isinstance(node, dict):
        for key, value in node.items():
            yield key, value
            yield from _items(value)
    elif isinstance(node, list):
        for item in node:
            yield from _items(item)


def _words(snippet: str) -> list[str]:
    """The argv after `alignflow`: shell words up to an operator or a comment, without
    `...` and `[optional]` parts."""
    try:
        words = shlex.split(snippet, comments=True)
    except ValueError:  # an unbalanced quote in prose: the words up to it
        words = snippet.split()
    out, depth = [], 0
    for word in words[1:]:
        if word in _OPERATORS:
            break
        depth += word.count("[") - word.count("]") if word.startswith("[") or depth else 0
        if depth or word.endswith("]") and not word.startswith("--") and "[" not in word:
            continue
        if word == "..." and out and out[-1].startswith("--") and "=" not in out[-1]:
            out.pop()  # `--pretrain ...`: a flag whose value the text leaves out
        elif word != "..." and not word.startswith("["):
            out.append(word)
    return out


def _expand(argv: list[str]) -> list[tuple[str, ...]]:
    """`start|tick X` -> (start, X) and (tick, X): one command per alternative."""
    for i, word in enumerate(argv):
        parts = word.split("|")
        if len(parts) > 1 and all(re.fullmatch(r"[a-z][a-z-]*", p) for p in parts):
            return [c for p in parts for c in _expand([*argv[:i], p, *argv[i + 1:]])]
    return [tuple(argv)] if argv else []
