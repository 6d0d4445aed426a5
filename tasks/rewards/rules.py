"""Built-in rule rewards: GSM8K answer checking, answer format, and a toy target rule.

Specs (see `rule_source`): `rule:gsm8k` (format + correctness), `rule:correct`,
`rule:format` (`#### N`), `rule:format:boxed` (`\\boxed{N}`), `rule:target:<text>`.
Rules read the response (query minus prompt) and compare with the label; they never
raise on odd model output — an answer that cannot be read scores 0.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import ClassVar

import torch

from alignflow.errors import ConfigError
from alignflow.tasks.rewards.base import RewardOutput, check_batch, responses_of

# A number as GSM8K writes it: optional sign and $, thousands commas, optional decimals.
_NUM = r"-?(?:\$\s?)?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?"
_HASH = re.compile(rf"####\s*({_NUM})")
_BOXED = re.compile(rf"\\boxed\s*\{{\s*(?:\\text\{{\s*)?({_NUM})")
_ANSWER_IS = re.compile(rf"answer\s+is\s*[:=]?\s*(?:\\?\(|\*\*)?\s*({_NUM})", re.IGNORECASE)
_ANY_NUM = re.compile(_NUM)
FORMATS: dict[str, re.Pattern[str]] = {"hash": _HASH, "boxed": _BOXED}


def parse_number(text: str) -> Decimal | None:
    """'$1,234.50' → Decimal('1234.50'); None when it is not a number."""
    clean = text.replace(",", "").replace("$", "").replace(" ", "")
    try:
        value = Decimal(clean)
    except InvalidOperation:
        return None
    return value if value.is_finite() else None


def extract_answer(response: str) -> Decimal | None:
    """The model's final number: `#### N`, else `\\boxed{N}`, else "answer is N", else the
    last number in the text (the last match of the first pattern that matches)."""
    for pattern in (_HASH, _BOXED, _ANSWER_IS, _ANY_NUM):
        found = pattern.findall(response)
        if found:
            return parse_number(found[-1])
    return None


def extract_label(label: str | None) -> Decimal | None:
    """A label is either a bare number ('1,000') or a full GSM8K solution ending '#### N'."""
    if label is None:
        return None
    found = _HASH.findall(label)
    return parse_number(found[-1] if found else label.strip())


def is_correct(response: str, label: str | None) -> bool:
    """Numeric equality of the extracted answer and the label (18 == 18.0 == 18.00)."""
    got, want = extract_answer(response), extract_label(label)
    return got is not None and want is not None and got == want


def has_format(response: str, style: str = "hash") -> bool:
    """True when the response holds a final-answer marker of `style` with a number."""
    return FORMATS[style].search(response) is not None


def target_fraction(response: str, target: str) -> float:
    """Share of the response's characters covered by non-overlapping copies of `target`."""
    if not response or not target:
        return 0.0
    return min(1.0, response.count(target) * len(target) / len(response))


def _vec(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


@dataclass(frozen=True)
class Gsm8kRule:
    """reward = format_weight · [answer marker present] + correct_weight · [answer == label].

    Defaults (0.1, 1.0) give 1.1 for a correct answer in `#### N` form, 1.0 for a correct
    answer found another way (boxed, "answer is", last number), 0.1 for a well-formed wrong
    answer and 0 otherwise: correctness dominates, the format term breaks ties early on.
    """

    SCORES: ClassVar[tuple[str, ...]] = ("format", "correct")  # the keys `score` returns
    LOGS: ClassVar[tuple[str, ...]] = ("answer_found",)
    format_weight: float = 0.1
    correct_weight: float = 1.0
    style: str = "hash"

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        responses = responses_of(queries, prompts)
        fmt = _vec([float(has_format(r, self.style)) for r in responses])
        ok = _vec([float(is_correct(r, lab)) for r, lab in zip(responses, labels, strict=True)])
        found = _vec([float(extract_answer(r) is not None) for r in responses])
        rewards = self.format_weight * fmt + self.correct_weight * ok
        return RewardOutput(rewards, {"format": fmt, "correct": ok}, {"answer_found": found})


@dataclass(frozen=True)
class CorrectRule:
    """1.0 when the extracted final number equals the label, else 0."""

    SCORES: ClassVar[tuple[str, ...]] = ("correct",)
    LOGS: ClassVar[tuple[str, ...]] = ()

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        responses = responses_of(queries, prompts)
        ok = _vec([float(is_correct(r, lab)) for r, lab in zip(responses, labels, strict=True)])
        return RewardOutput(ok, {"correct": ok})


@dataclass(frozen=True)
class FormatRule:
    """1.0 when the response has a final-answer marker (`#### N` or `\\boxed{N}`), else 0."""

    SCORES: ClassVar[tuple[str, ...]] = ("format",)
    LOGS: ClassVar[tuple[str, ...]] = ()
    style: str = "hash"

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        fmt = _vec([float(has_format(r, self.style)) for r in responses_of(queries, prompts)])
        return RewardOutput(fmt, {"format": fmt})


@dataclass(frozen=True)
class TargetRule:
    """Toy reward for CI: share of the response made of `target` (scores['present'] 0/1).

    A tiny random policy learns it in a few GRPO steps, so tests can see reward go up.
    """

    SCORES: ClassVar[tuple[str, ...]] = ("target", "present")
    LOGS: ClassVar[tuple[str, ...]] = ()
    target: str

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        responses = responses_of(queries, prompts)
        frac = _vec([target_fraction(r, self.target) for r in responses])
        present = _vec([float(self.target in r) for r in responses])
        return RewardOutput(frac, {"target": frac, "present": present})


def _format_rule(arg: str | None) -> FormatRule:
    style = arg or "hash"
    if style not in FORMATS:
        raise ConfigError(f"unknown format style {style!r} in 'rule:format:{style}'; "
                          f"expected one of {sorted(FORMATS)}")
    return FormatRule(style)


def _target_rule(arg: str | None) -> TargetRule:
    if not arg:
        raise ConfigError("'rule:target' needs a target string, e.g. 'rule:target:cat'")
    return TargetRule(arg)


RULES: dict[str, Callable[[str | None], object]] = {
    "gsm8k": lambda arg: Gsm8kRule(style=_format_rule(arg).style),
    "correct": lambda arg: CorrectRule(),
    "format": _format_rule,
    "target": _target_rule,
}


LABELLED = frozenset({"gsm8k", "correct"})  # rules that compare the answer with the label


def compares_label(spec: str) -> bool:
    """Whether `rule:<name>...` scores by comparing with each prompt's label: without labels
    such a rule scores every answer 0 for correctness."""
    return spec.startswith("rule:") and spec.split(":")[1] in LABELLED


def rule_source(spec: str):
    """`rule:<name>[:<arg>]` → a rule source; ConfigError listing the names otherwise."""
    _, _, rest = spec.partition(":")
    name, _, arg = rest.partition(":")
    if name not in RULES:
        raise ConfigError(f"unknown reward rule {name!r} in {spec!r}; expected one of "
                          f"{', '.join('rule:' + n for n in sorted(RULES))}")
    return RULES[name](arg or None)
