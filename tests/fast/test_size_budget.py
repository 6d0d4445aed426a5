"""A size budget, so the code stays readable: no module over 300 lines, no function over 40."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("alignflow", "flows", "tasks", "artifacts", "catalog")
MAX_FILE, MAX_FUNCTION = 300, 40


def _sources():
    for package in PACKAGES:
        yield from sorted((ROOT / package).rglob("*.py"))


def test_no_file_over_the_budget():
    big = [f"{p.relative_to(ROOT)}: {n} lines" for p in _sources()
           if (n := len(p.read_text().splitlines())) > MAX_FILE]
    assert not big, f"split these modules (> {MAX_FILE} lines):\n" + "\n".join(big)


def test_no_function_over_the_budget():
    long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                n = node.end_lineno - node.lineno + 1
                if n > MAX_FUNCTION:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name}: {n} lines")
    assert not long, f"split these functions (> {MAX_FUNCTION} lines):\n" + "\n".join(long)
