"""Every repository path and `alignflow.*` module the docs name exists, and no doc points
outside the repository, so a reader who follows a name finds it (issue 45).

What counts as a name: a word inside a Markdown code span or the target of a Markdown link
(fenced code blocks hold store layouts and shell sessions, not repo names). A word is a
repo path when its first segment is a top-level entry of the repository (`flows/rl/grpo.py`,
`docs/`, `README.md`); a bare file name (`codec.py`) must exist somewhere in the repo; a
dotted `alignflow.x.y` must resolve to a module file, optionally followed by names that
module defines. URLs, globs, placeholders (`<run_id>`), user paths (`./x`, `~/x`, `$X`)
and store keys (`runs/...`: not a top-level entry) are not repo names.

Sources: README.md, docs/**/*.md, bench/RESULTS.md (its current table; the dated history
under bench/history/ records what was true then, so its names are not checked), and the
docstrings of examples/*.py.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"alignflow": "alignflow", "flows": "flows", "tasks": "tasks",
            "artifacts": "artifacts", "catalog": "catalog"}
TOP = {p.name for p in ROOT.iterdir() if not p.name.startswith(".")} | {".ci"}
TOP -= {"alignflow.egg-info"}
FILE_EXT = (".py", ".md", ".sql", ".tsv", ".toml", ".sh", ".yaml", ".jsonl")
# Names that look like repo files but are not, each with the reason.
ALLOWED = {
    "my_reward.py": "a user's own file in a usage example",
    "reward.py": "a user's own file in a usage example",
    "file.py": "placeholder for any flow file",
    "f.py": "placeholder for any flow file",
    "alignflow.schema": "a Parquet metadata key, not a module",
    "alignflow.schema_version": "a Parquet metadata key, not a module",
    "train_ppo_ray.py": "OpenRLHF's launcher, named as the reference",
    "train_sft.py": "OpenRLHF's CLI, named as the reference",
    "train_dpo.py": "OpenRLHF's CLI, named as the reference",
    "train_rm.py": "OpenRLHF's CLI, named as the reference",
}
# Other libraries' names in `module.Class` form, as the docs write them (`pa.Table`).
LIBRARIES = {"torch", "nn", "pa", "pyarrow", "datasets", "deepspeed", "zero", "transformers",
             "vllm", "ray", "np", "numpy", "duckdb", "fsspec", "openrlhf"}
SPAN = re.compile(r"(?<!`)`([^`]+?)`(?!`)")
LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)
OUTSIDE = re.compile(r"\.\./shared/|(?<![\w.])/work/")  # this machine's folders beside the repo
WORD = re.compile(r"[^\s,;()\[\]{}\"'=|]+")


@functools.cache
def _repo_files() -> tuple[str, ...]:
    """Every file of the working tree (relative, posix), hidden folders and caches aside."""
    found = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d != "__pycache__"
                   and not d.endswith(".egg-info")]
        rel = Path(folder).relative_to(ROOT).as_posix()
        found += [name if rel == "." else f"{rel}/{name}" for name in files]
    return tuple(found)


def sources() -> list[Path]:
    """The documents whose names are checked."""
    docs = sorted((ROOT / "docs").rglob("*.md"))
    return [ROOT / "README.md", *docs, ROOT / "bench/RESULTS.md"]


def _example_docstrings() -> list[tuple[str, str]]:
    out = []
    for path in sorted((ROOT / "examples").glob("*.py")):
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
        out.append((str(path.relative_to(ROOT)), doc))
    return out


def _words(text: str) -> list[tuple[str, bool]]:
    """(word, from a link) of the code spans and link targets of a Markdown text."""
    text = FENCE.sub("", text)
    found = [(w, False) for span in SPAN.findall(text) for w in WORD.findall(span)]
    return found + [(t.split("#")[0], True) for t in LINK.findall(text)]


def _module_file(parts: list[str]) -> tuple[Path, list[str]]:
    """The deepest module file of `alignflow.a.b...` and the names left after it."""
    node, names = ROOT / "alignflow", parts[1:]
    if names and names[0] in PACKAGES and names[0] != "alignflow":
        node = ROOT / PACKAGES[names.pop(0)]
    while names and ((node / names[0]).is_dir() or (node / f"{names[0]}.py").is_file()):
        node = node / names.pop(0)
    return (node / "__init__.py" if node.is_dir() else node.with_suffix(".py")), names


def _module_problem(dotted: str) -> str | None:
    """None when `alignflow.a.b[:name]` is a module file and the first name after it (or
    the `:name`) is a word of that file."""
    dotted, _, attr = dotted.partition(":")
    parts = dotted.rstrip(".").split(".")
    path, names = _module_file(parts)
    wanted = [n for n in (names[:1] or [attr.split(".")[0]]) if n]
    text = path.read_text()
    missing = [n for n in wanted if not re.search(rf"\b{re.escape(n)}\b", text)]
    return f"{dotted} ({missing[0]} not in {path.relative_to(ROOT)})" if missing else None


def _path_problem(word: str, link: bool, base: Path) -> str | None:
    """None when `word` is not a repo name, or names something that exists."""
    word = word.rstrip(".:;")
    if "://" in word or word.startswith(("#", "mailto:", "$", "~")) or not word:
        return None
    if "/work/" in word or word.startswith(("../shared", "/work")):
        return f"{word} (outside the repository)"
    if word in ALLOWED or any(c in word for c in "*<>?{}"):
        return None
    if re.fullmatch(r"alignflow(\.[A-Za-z_]\w*)+(:[\w.]+)?", word.split("(")[0]):
        return _module_problem(word.split("(")[0])
    if re.fullmatch(r"[a-z_]\w*(\.[a-z_]\w*)*\.[A-Z]\w*", word) and word.split(".")[0] not in LIBRARIES:
        return _relative_problem(word)
    path = word.split(":")[0]
    if path.startswith(("./", "/", "-", "@")):
        return None
    if link:
        target = (base / path).resolve()
        if not target.is_relative_to(ROOT):
            return f"{word} (outside the repository)"
        return None if target.exists() else f"{word} (link target missing)"
    head = path.split("/")[0]
    if "/" in path and head in TOP:
        return None if _exists(path) else f"{word} (no such path)"
    stem = path.rsplit(".", 1)[0]
    if "/" not in path and path.endswith(FILE_EXT) and stem[:1].islower() and path not in TOP:
        named = any(f"/{w}".endswith(f"/{path}") for w in _repo_files())
        return None if named else f"{word} (no file of that name)"
    return None


def _exists(path: str) -> bool:
    """A file or folder, or a module in slash form (`flows/engine`), or a name in a module
    (`flows/lazyref.MODULES`)."""
    if (ROOT / path).exists() or (ROOT / f"{path}.py").is_file():
        return True
    module, _, name = path.rpartition(".")
    source = ROOT / f"{module}.py"
    return bool(module) and source.is_file() and re.search(rf"\b{name}\b", source.read_text()) is not None


def _relative_problem(word: str) -> str | None:
    """None when `module.Class` (a module named relative to its package, as prose does:
    `base.Trainer`, `engines.hf.HFEngine`) is a module file of the repo defining Class."""
    *parts, name = word.split(".")
    tail = "/".join(parts)
    for where in _repo_files():
        if not (f"/{where}".endswith((f"/{tail}.py", f"/{tail}/__init__.py"))):
            continue
        if re.search(rf"\b{name}\b", (ROOT / where).read_text()):
            return None
    return f"{word} (no module {tail} defining {name})"


def _outside(name: str, text: str) -> list[str]:
    """Mentions anywhere in the text (prose too) of this machine's folders outside the repo."""
    return [f"{name}: {m.group(0)}... (outside the repository)" for m in OUTSIDE.finditer(text)]


def problems() -> list[str]:
    """Every name the sources give that does not exist, as 'doc: name (why)'; the dated
    history is checked only for references outside the repository."""
    found = []
    for path in sorted((ROOT / "bench/history").glob("*.md")):
        found += _outside(str(path.relative_to(ROOT)), path.read_text())
    docs = [(str(p.relative_to(ROOT)), p.read_text(), p.parent) for p in sources()]
    docs += [(name, doc, ROOT) for name, doc in _example_docstrings()]
    for name, text, base in docs:
        found += _outside(name, text)
        for word, link in _words(text):
            why = _path_problem(word, link, base)
            if why and f"{name}: {why}" not in found:
                found.append(f"{name}: {why}")
    return found


def test_every_path_and_module_the_docs_name_exists():
    bad = problems()
    assert not bad, "names in the docs that do not exist:\n" + "\n".join(bad)


def test_the_architecture_overview_fits_a_sitting():
    """The overview stays an overview: the details live in docs/reference/."""
    lines = (ROOT / "docs/ARCHITECTURE.md").read_text().count("\n")
    assert lines <= 300, f"docs/ARCHITECTURE.md has {lines} lines; move details to docs/reference/"
