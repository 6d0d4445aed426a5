"""The countdown task's exact check (`rule:countdown`): the response's last arithmetic
expression uses every given number exactly once and equals the target.

Labels are `TARGET:n1,n2,...` (`alignflow:countdown`). The expression is read with `ast`
and evaluated over fractions: only integers, + − × ÷ and parentheses, so nothing in a
response is ever executed. Plain Python (no torch), so a config check can import it.
"""

from __future__ import annotations

import ast
import re
from collections import Counter
from fractions import Fraction

_CANDIDATE = re.compile(r"[\d(][\d\s+\-*/×÷().]*[\d)]")
_OPS = {ast.Add: Fraction.__add__, ast.Sub: Fraction.__sub__, ast.Mult: Fraction.__mul__,
        ast.Div: Fraction.__truediv__}
MAX_CHARS = 200  # a longer "expression" is not an answer


def parse_label(label: str | None) -> tuple[int, list[int]] | None:
    """'36:23,25,12' → (36, [23, 25, 12]); None when it is not such a label."""
    target, _, numbers = (label or "").partition(":")
    try:
        return int(target), [int(n) for n in numbers.split(",")]
    except ValueError:
        return None


def _value(node: ast.AST, used: list[int]) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        return _OPS[type(node.op)](_value(node.left, used), _value(node.right, used))
    raise ValueError("not + - * / over integers")


def evaluate(expr: str) -> tuple[Fraction, list[int]] | None:
    """(value, the integers it uses) of an arithmetic expression; None if it is not one."""
    text = expr.replace("×", "*").replace("÷", "/").strip()
    if not text or len(text) > MAX_CHARS:
        return None
    try:
        used: list[int] = []
        return _value(ast.parse(text, mode="eval").body, used), used
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return None


def last_expression(response: str) -> str | None:
    """The last stretch of the response that is an expression with an operator (the left
    side of `expr = target` included)."""
    found = [m.group(0) for m in _CANDIDATE.finditer(response)
             if any(op in m.group(0) for op in "+-*/×÷")]
    return found[-1] if found else None


def countdown_correct(response: str, label: str | None) -> bool:
    """True when the response's last expression uses exactly the label's numbers, each
    once, and equals its target."""
    parsed, expr = parse_label(label), last_expression(response)
    if parsed is None or expr is None:
        return False
    got = evaluate(expr)
    target, numbers = parsed
    return got is not None and got[0] == target and Counter(got[1]) == Counter(numbers)
