"""Verifiable tasks generated from a fixed seed (no download): `alignflow:arith[-D]` and
`alignflow:countdown[-N]`, each with a `train` split and a held-out `test` split.

Why generated: a small model can get better at them within minutes, and the answer is
checked exactly (`rule:correct` for arith, `rule:countdown` for countdown), so a rising
held-out accuracy means the task was learned, not a format.

- `arith-D` (D = 2..8 digits in the problem, the difficulty knob, the first operand
  holding the larger half; `arith` = `arith-3`): `arith-3` asks "What is 47 + 8?" → label
  "55", `arith-4` "What is 47 - 25?"; + and − (no negative results).
- `arith-slip-D` (`arith-slip` = `arith-slip-3`): `arith-D`'s problems, labels and splits,
  but its `output` (the SFT demonstration) is a sloppy teacher's: on about half the problems
  (by a hash of the question) it forgets every carry and borrow ("What is 47 + 8?" → "45").
  SFT on it teaches the task partly; a reward for the exact `label` can teach the rest.
- `countdown-N` (N = 3..5 numbers; `countdown` = `countdown-3`): reach a target with
  every given number once and + − × ÷ → label "TARGET:n1,n2,...", the reference
  expression in `output`.

Rows: `input` (the question), `label`, `output` (an answer, for SFT), `datasource` (the
set's full name, so eval metrics are per set). The split of a problem is a function of the
problem itself (a hash of its question), so the held-out problems are disjoint from the
training ones by construction, however many rows either split draws.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable, Iterator
from functools import cache

SEED = 20261203
HELD_OUT_ONE_IN = 8  # a problem whose hash is 0 mod 8 is held out (`test`)
SIZES = {"train": 2000, "test": 200}
ARITH_DIGITS = range(2, 9)
COUNTDOWN_NUMBERS = range(3, 6)
SPLIT_NAMES = ("train", "test")


def is_held_out(question: str) -> bool:
    """Whether a problem belongs to the held-out split: decided by its text alone."""
    digest = hashlib.sha256(question.encode()).digest()
    return int.from_bytes(digest[:4], "big") % HELD_OUT_ONE_IN == 0


def _operand(digits: int, rng: random.Random) -> int:
    return rng.randint(0 if digits == 1 else 10 ** (digits - 1), 10 ** digits - 1)


def _arith(digits: int, rng: random.Random) -> dict:
    """`digits` digits in all: the first operand has the larger half of them."""
    a, b = _operand((digits + 1) // 2, rng), _operand(digits // 2, rng)
    op = rng.choice("+-")
    a, b = (a, b) if op == "+" or a >= b else (b, a)
    answer = str(a + b if op == "+" else a - b)
    return {"input": f"What is {a} {op} {b}?", "label": answer, "output": answer}


def forgot_carry(question: str) -> str:
    """The answer to an arith question with every carry (+) or borrow (−) forgotten: each
    digit on its own, mod 10 ("What is 47 + 8?" → "45", "What is 51 - 2?" → "59")."""
    _, _, a, op, b = question.rstrip("?").split()
    sign = 1 if op == "+" else -1
    digits = zip(a, b.rjust(len(a), "0"), strict=True)
    return str(int("".join(str((int(x) + sign * int(y)) % 10) for x, y in digits)))


def _slips(question: str) -> bool:
    """Whether the sloppy teacher of `arith-slip` forgets the carries on this problem."""
    return hashlib.sha256(f"slip:{question}".encode()).digest()[0] % 2 == 1


def _expression(numbers: list[int], rng: random.Random) -> tuple[str, int] | None:
    """A random expression using every number once whose value is a whole number >= 0."""
    terms = [(str(n), n) for n in numbers]
    while len(terms) > 1:
        (ta, a), (tb, b) = terms.pop(rng.randrange(len(terms))), terms.pop(rng.randrange(len(terms)))
        op = rng.choice("+-*/")
        if op == "-" and a < b:
            (ta, a), (tb, b) = (tb, b), (ta, a)
        if op == "/" and (b == 0 or a % b):
            op = "+"
        value = {"+": a + b, "-": a - b, "*": a * b, "/": a // max(b, 1)}[op]
        terms.append((f"({ta} {op} {tb})", value))
    text, value = terms[0]
    return (text[1:-1], value) if 0 < value <= 999 else None


def _countdown(count: int, rng: random.Random) -> dict | None:
    numbers = [rng.randint(1, 25) for _ in range(count)]
    made = _expression(numbers, rng)
    if made is None:
        return None
    expr, target = made
    shown = ", ".join(map(str, numbers))
    question = (f"Using the numbers {shown}, each exactly once, and + - * / with parentheses, "
                f"write an expression equal to {target}.")
    return {"input": question, "label": f"{target}:{','.join(map(str, numbers))}",
            "output": expr}


def _draws(make: Callable[[random.Random], dict | None], seed: int) -> Iterator[dict]:
    rng = random.Random(seed)
    for _ in range(200 * sum(SIZES.values())):  # a small problem space runs out: stop
        row = make(rng)
        if row is not None:
            yield row


@cache
def _generate(family: str, level: int) -> dict[str, tuple[dict, ...]]:
    """Both splits of one set: distinct problems, in draw order, up to `SIZES` each."""
    if family == "arith-slip":  # arith's problems and splits; a sloppy teacher's outputs
        return {s: tuple({**r, "datasource": f"{family}-{level}", "output": forgot_carry(
            r["input"]) if _slips(r["input"]) else r["output"]} for r in rows)
            for s, rows in _generate("arith", level).items()}
    make = (lambda r: _arith(level, r)) if family == "arith" else (lambda r: _countdown(level, r))
    name = f"{family}-{level}"
    splits: dict[str, list[dict]] = {s: [] for s in SPLIT_NAMES}
    seen: set[str] = set()
    for row in _draws(make, SEED + 1000 * level + (family == "countdown")):
        if row["input"] in seen:
            continue
        seen.add(row["input"])
        split = "test" if is_held_out(row["input"]) else "train"
        if len(splits[split]) < SIZES[split]:
            splits[split].append({**row, "datasource": name})
        if all(len(splits[s]) >= SIZES[s] for s in SPLIT_NAMES):
            break
    return {s: tuple(rows) for s, rows in splits.items()}


def _names() -> dict[str, tuple[str, int]]:
    names = {f"arith-{d}": ("arith", d) for d in ARITH_DIGITS}
    names |= {f"arith-slip-{d}": ("arith-slip", d) for d in ARITH_DIGITS}
    names |= {f"countdown-{n}": ("countdown", n) for n in COUNTDOWN_NUMBERS}
    return {"arith": ("arith", 3), "arith-slip": ("arith-slip", 3),
            "countdown": ("countdown", 3), **names}


GENERATED: dict[str, tuple[str, int]] = _names()  # name → (family, difficulty)


def generated_rows(name: str, split: str) -> list[dict]:
    """The rows of split `split` ("train" or "test") of the generated set `name`."""
    family, level = GENERATED[name]
    return [dict(r) for r in _generate(family, level)[split]]
