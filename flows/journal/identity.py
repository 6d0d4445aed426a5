"""Stable identities: run ids, task seeds, code hashes, cache keys.

Everything here is derived with sha256 so it is the same in every process and on every
machine (Python's `hash()` is salted per process).
"""

from __future__ import annotations

import ast
import hashlib
import inspect
import re
import secrets
import subprocess
import textwrap
import time
from pathlib import Path
from typing import Any

from alignflow.errors import ConfigError


def new_run_id(flow_name: str) -> str:
    """`<flow>-<yyyymmdd-hhmmss>-<4 hex>` (UTC)."""
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    return f"{flow_name}-{stamp}-{secrets.token_hex(2)}"


RUN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.=+-]{0,127}")


def check_run_id(run_id: str) -> str:
    """`run_id` if it is safe as one folder name in any store (letters, digits and `_ . = +
    -`, not starting with `.` or `-`, at most 128 characters); `ConfigError` otherwise."""
    if not isinstance(run_id, str) or not RUN_ID.fullmatch(run_id):
        raise ConfigError(f"run id {run_id!r}: expected 1-128 characters from A-Z a-z 0-9 _ . = "
                          "+ -, not starting with '.' or '-' (no '/', spaces or quotes)")
    return run_id


def task_seed(run_seed: int, task_key: str) -> int:
    """Seed of one task: first 32 bits of sha256(f"{run_seed}:{task_key}")."""
    return int(hashlib.sha256(f"{run_seed}:{task_key}".encode()).hexdigest()[:8], 16)


def source_hash(fn: Any) -> str:
    """sha256 of a function's source (dedented), or of its qualified name if none is readable."""
    try:
        text = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):
        text = f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"
    return hashlib.sha256(text.encode()).hexdigest()


def is_task_decorator(node: ast.expr) -> bool:
    """`@task`, `@task(...)`, `@engine.task`: the decorator that declares a task."""
    target = node.func if isinstance(node, ast.Call) else node
    name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
    return name == "task"


def file_task_hashes(path: str | Path) -> dict[str, str]:
    """Task name -> `source_hash` of each `@task` function defined in a flow file, read as
    text (nothing is imported: `status` must not run code a store names)."""
    text = Path(path).read_text()
    lines = text.splitlines(keepends=True)
    out = {}
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                is_task_decorator(d) for d in node.decorator_list):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            source = textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))
            out[node.name] = hashlib.sha256(source.encode()).hexdigest()
    return out


def file_hash(path: str | Path) -> str | None:
    """sha256 of a source file, or None when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def git_commit(path: str | Path) -> str | None:
    """The git commit of the repository holding `path`, or None outside a repository."""
    folder = Path(path).resolve()
    folder = folder if folder.is_dir() else folder.parent
    try:
        out = subprocess.run(["git", "-C", str(folder), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=5, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def code_version(fn: Any) -> dict:
    """What run.json records of the code a flow function starts with: its file, the file's
    sha256 and the git commit it lies in (None each where unknown)."""
    try:
        path = inspect.getsourcefile(fn)
    except TypeError:
        path = None
    return {"git_commit": git_commit(path) if path else None,
            "flow_sha256": file_hash(path) if path else None, "flow_file": path}


def cache_key(name: str, version: int, code_hash: str, input_hash: str) -> str:
    """Key of the cross-run cache: the same task, code and inputs give the same key."""
    text = f"{name}\0{version}\0{code_hash}\0{input_hash}"
    return hashlib.sha256(text.encode()).hexdigest()
