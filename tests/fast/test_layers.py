"""The package's layers, checked from its import graph (every import, also inside functions).

Dependencies point one way: the public face (`alignflow`) → the CLI → the flow families →
the engine (itself layered: run control → trust and Ray → the kernel `flows/*.py` → the
journal and tracking); the families → the steps → the building blocks (`tasks/*`); everything →
the store (`artifacts`) → the errors (`alignflow.errors`), lazy package names
(`alignflow.lazy`), benchmark phase marks (`alignflow.timeline`) and actors found again by
name (`alignflow.detached`), leaves every layer may import.
The engine never imports `tasks` or `catalog`; `tasks` never imports `flows`; `artifacts`
imports only the errors. A new package joins by getting a row in `ALLOWED`.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {"alignflow": "alignflow", "flows": "alignflow.flows", "tasks": "alignflow.tasks",
           "artifacts": "alignflow.artifacts", "catalog": "alignflow.catalog"}

BLOCKS = {"errors", "lazy", "timeline", "detached", "artifacts"}  # what every layer may use
TASK_BASE = BLOCKS | {"tasks.losses", "tasks.zoo", "tasks.advantages", "tasks.data",
                      "tasks.modeling", "tasks.trainers", "tasks.engines", "tasks.rewards",
                      "tasks.distributed", "tasks.plan", "tasks.simulate"}
ENGINE_BASE = BLOCKS | {"flows", "flows.config", "flows.journal", "flows.tracking"}
ENGINE = {"flows", "flows.journal", "flows.tracking", "flows.trust", "flows.ray", "flows.control"}
ALLOWED: dict[str, set[str]] = {
    "errors": set(),
    "lazy": set(),
    "timeline": set(),
    "detached": set(),
    "artifacts": {"errors", "lazy"},
    "catalog": BLOCKS,
    "tasks.losses": BLOCKS,
    "tasks.zoo": BLOCKS,
    "tasks.advantages": BLOCKS | {"tasks.losses"},
    "tasks.data": BLOCKS | {"tasks.zoo"},
    "tasks.simulate": BLOCKS,
    "tasks.modeling": BLOCKS | {"tasks.losses", "tasks.simulate"},
    "tasks.distributed": BLOCKS | {"tasks.simulate"},
    "tasks.trainers": BLOCKS | {"tasks.modeling", "tasks.distributed"},
    "tasks.engines": BLOCKS | {"tasks.modeling", "tasks.distributed", "tasks.simulate"},
    "tasks.rewards": BLOCKS | {"tasks.modeling", "tasks.data", "tasks.zoo"},
    "tasks.plan": BLOCKS | {"tasks.modeling", "tasks.trainers", "tasks.engines",
                            "tasks.simulate"},
    "tasks.steps": TASK_BASE,
    "tasks.agents": TASK_BASE,
    "tasks.rl": TASK_BASE | {"tasks.steps", "tasks.agents"},
    "tasks.offline": TASK_BASE | {"tasks.steps"},
    "tasks.loops": TASK_BASE | {"tasks.steps", "tasks.offline"},
    "flows.config": BLOCKS,
    # the engine, bottom up: the journal and tracking, the kernel (`flows/*.py`: tasks,
    # flows, the wrapper around a task call, finding a flow), trust and Ray, run control
    "flows.journal": BLOCKS | {"flows.config"},
    "flows.tracking": BLOCKS | {"flows.config"},
    "flows": BLOCKS | {"flows.config", "flows.journal"},
    "flows.trust": ENGINE_BASE,
    "flows.ray": ENGINE_BASE,
    "flows.control": ENGINE_BASE | {"flows.trust", "flows.ray"},
    "flows.rl": {*ENGINE, "flows.config", "flows.compat", "tasks"} | BLOCKS,
    "flows.offline": {*ENGINE, "flows.config", "flows.compat", "tasks"} | BLOCKS,
    "flows.loops": {*ENGINE, "flows.config", "flows.compat", "flows.rl", "flows.offline",
                    "tasks"} | BLOCKS,
    "flows.campaign": {*ENGINE, "flows.config", "tasks"} | BLOCKS,
    "flows.compat": {*ENGINE, "flows.config", "tasks.zoo"} | BLOCKS,
    "flows.cli": {*ENGINE, "flows.config", "flows.compat", "flows.rl", "flows.offline",
                  "flows.loops", "flows.campaign", "catalog", "tasks"} | BLOCKS,
    "face": {*ENGINE, "flows.config", "flows.cli", "flows.campaign", "catalog",
             "tasks"} | BLOCKS,
}


def _modules() -> dict[str, Path]:
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            rel = ".".join(path.relative_to(ROOT / folder).with_suffix("").parts)
            name = package if rel == "__init__" else f"{package}.{rel.removesuffix('.__init__')}"
            found[name] = path
    return found


def _graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> modules of ours it imports (`from pkg import mod` counts as `pkg.mod`)."""
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module:
                for alias in node.names:
                    full = f"{node.module}.{alias.name}"
                    edges[name].add(full if full in modules else node.module)
            elif isinstance(node, ast.Import):
                edges[name].update(a.name for a in node.names)
    return {k: {t for t in v if t in modules and t != k} for k, v in edges.items()}


def _group(module: str) -> str:
    parts = module.split(".")
    if module in ("alignflow", "alignflow.cli", "alignflow.config"):
        return "face"
    if parts[1] in ("errors", "lazy", "timeline", "detached", "artifacts", "catalog"):
        return parts[1]
    if parts[1] == "tasks":
        return ".".join(parts[1:3]) if len(parts) > 2 else "tasks"
    sub = ".".join(parts[1:3])  # flows
    return sub if sub in ALLOWED else "flows"


def _allowed(src: str, dst: str) -> bool:
    a, b = _group(src), _group(dst)
    return a == b or b in ALLOWED[a] or (b.startswith("tasks.") and "tasks" in ALLOWED[a])


def test_every_package_has_a_layer():
    unknown = {_group(m) for m in _modules()} - set(ALLOWED) - {"tasks"}
    assert not unknown, f"add these packages to ALLOWED: {sorted(unknown)}"


def test_imports_point_down_only():
    graph = _graph(_modules())
    wrong = sorted(f"{a} -> {b}" for a, bs in graph.items() for b in bs if not _allowed(a, b))
    assert not wrong, "imports against the layers:\n" + "\n".join(wrong)


def test_no_import_cycle():
    graph = _graph(_modules())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while (w := stack.pop()) != v:
                comp.append(w)
            if comp:
                cycles.append([v, *comp])

    for module in sorted(graph):
        if module not in index:
            visit(module)
    assert not cycles, f"import cycles: {cycles}"
