"""Code hashes of a built-in flow's tasks, read from source text without importing anything.

`alignflow status` marks committed tasks whose code changed since they ran. Importing the
flow to ask would cost torch and transformers (seconds) and run module code; instead this
reads the flow module and the `alignflow.flows` modules it imports, finds every task they
declare (`@task def f` or `name = task(...)(module.f)`), opens the module that defines `f`
and hashes `f`'s text exactly as `identity.source_hash` hashes the live function.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import textwrap
from pathlib import Path

from alignflow.flows.journal.identity import is_task_decorator

_FLOWS = "alignflow.flows"


def module_file(name: str) -> Path | None:
    """The source file of module `name` under an `alignflow` subpackage, found by walking
    folders (only the subpackage's own `__init__`, a leaf, is imported to locate it)."""
    parts = name.split(".")
    if len(parts) < 2 or parts[0] != "alignflow":
        return None
    spec = importlib.util.find_spec(".".join(parts[:2]))
    if spec is None or not spec.submodule_search_locations:
        return None
    base = Path(next(iter(spec.submodule_search_locations))).joinpath(*parts[2:])
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def _function_hash(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
    source = textwrap.dedent("".join(lines[first - 1 : node.end_lineno]))
    return hashlib.sha256(source.encode()).hexdigest()


def function_hash(module: str, name: str) -> str | None:
    """`source_hash` of the module-level function `module:name`, read without importing
    `module` (`flows/lazyref.py`); None if there is no such file or function."""
    path = module_file(module)
    found = _Module(module, path).hash_of(name) if path else None
    return found[1] if found else None


class _Module:
    """One parsed module: its functions and what its imported names refer to."""

    def __init__(self, name: str, path: Path) -> None:
        self.name, text = name, path.read_text()
        self.lines = text.splitlines(keepends=True)
        self.tree = ast.parse(text)
        self.functions = {n.name: n for n in self.tree.body
                          if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        self.imports: dict[str, str] = {}  # local name -> "module" or "module:attr"
        for node in self.tree.body:
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    sub = f"{node.module}.{alias.name}"
                    target = sub if module_file(sub) else f"{node.module}:{alias.name}"
                    self.imports[alias.asname or alias.name] = target
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.imports[alias.asname] = alias.name

    def hash_of(self, fn: str) -> tuple[str, str] | None:
        node = self.functions.get(fn)
        return None if node is None else (node.name, _function_hash(self.lines, node))


class _Reader:
    """Parses each module once while one flow's tasks are collected."""

    def __init__(self) -> None:
        self.modules: dict[str, _Module | None] = {}

    def module(self, name: str) -> _Module | None:
        if name not in self.modules:
            path = module_file(name)
            self.modules[name] = _Module(name, path) if path else None
        return self.modules[name]

    def function(self, module: _Module, expr: ast.expr) -> tuple[str, str] | None:
        """(task name, hash) of the function `expr` names in `module` (`f`, `mod.f` or the
        lazy "module:f")."""
        if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
            mod, _, attr = expr.value.partition(":")
            owner = self.module(mod) if attr else None
            return owner.hash_of(attr) if owner else None
        if isinstance(expr, ast.Name):
            target = module.imports.get(expr.id)
            if target is None:
                return module.hash_of(expr.id)
            mod, _, attr = target.partition(":")
            owner = self.module(mod) if attr else None
            return owner.hash_of(attr) if owner else None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name):
            target = module.imports.get(expr.value.id, "")
            owner = self.module(target) if ":" not in target else None
            return owner.hash_of(expr.attr) if owner else None
        return None


def _wrapped(value: ast.expr) -> ast.expr | None:
    """`f` of `task(...)(f)` or `task(f)`, else None."""
    if isinstance(value, ast.Call) and len(value.args) == 1:
        inner = value.func
        if isinstance(inner, ast.Call) and is_task_decorator(inner):
            return value.args[0]
        if is_task_decorator(value.func):
            return value.args[0]
    return None


def _tasks_of(reader: _Reader, module: _Module) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in module.tree.body:
        found = None
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and any(
                is_task_decorator(d) for d in node.decorator_list):
            found = (node.name, _function_hash(module.lines, node))
        elif isinstance(node, ast.Assign) and (fn := _wrapped(node.value)) is not None:
            found = reader.function(module, fn)
        if found:
            out[found[0]] = found[1]
    return out


def flow_task_hashes(module_name: str) -> dict[str, str]:
    """Task name -> code hash of every task the flow module `module_name` can call: its
    own and those of the `alignflow.flows` modules it imports (recursively)."""
    reader, out = _Reader(), {}
    pending, seen = [module_name], set()
    while pending:
        name = pending.pop()
        module = reader.module(name) if name not in seen else None
        seen.add(name)
        if module is None:
            continue
        out.update(_tasks_of(reader, module))
        pending += [t.partition(":")[0] for t in module.imports.values()
                    if t.startswith(_FLOWS + ".")]
    return out
