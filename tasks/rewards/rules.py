"""Built-in rule rewards: GSM8K answer checking, answer format, and a toy target rule.

Specs (see `rule_source`): `rule:gsm8k` (format + correctness), `rule:correct`,
`rule:format` (`#### N`), `rule:format:boxed` (`\\boxed{N}`), `rule:target:<text>`,
`rule:countdown` (the expression reaches the target with the given numbers).
Rules read the response (query minus prompt) and compare with the label; they never
raise on odd model output — an answer that cannot be read scores 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from alignflow.tasks.rewards.answers import (
    RULE_KEYS,
    check_rule,
    extract_answer,
    has_format,
    is_correct,
    target_fraction,
)
from alignflow.tasks.rewards.base import RewardOutput, check_batch, responses_of
from alignflow.tasks.rewards.countdown import countdown_correct


def _vec(values: list[float]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


@dataclass(frozen=True)
class Gsm8kRule:
    """reward = format_weight · [answer marker present] + correct_weight · [answer == label].

    Defaults (0.1, 1.0) give 1.1 for a correct answer in `#### N` form, 1.0 for a correct
    answer found another way (boxed, "answer is", last number), 0.1 for a well-formed wrong
    answer and 0 otherwise: correctness dominates, the format term breaks ties early on.
    """

    SCORES, LOGS = RULE_KEYS["gsm8k"]  # the keys `score` returns
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

    SCORES, LOGS = RULE_KEYS["correct"]  # the keys `score` returns

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        responses = responses_of(queries, prompts)
        ok = _vec([float(is_correct(r, lab)) for r, lab in zip(responses, labels, strict=True)])
        return RewardOutput(ok, {"correct": ok})


@dataclass(frozen=True)
class FormatRule:
    """1.0 when the response has a final-answer marker (`#### N` or `\\boxed{N}`), else 0."""

    SCORES, LOGS = RULE_KEYS["format"]  # the keys `score` returns
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

    SCORES, LOGS = RULE_KEYS["target"]  # the keys `score` returns
    target: str

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        responses = responses_of(queries, prompts)
        frac = _vec([target_fraction(r, self.target) for r in responses])
        present = _vec([float(self.target in r) for r in responses])
        return RewardOutput(frac, {"target": frac, "present": present})


@dataclass(frozen=True)
class CountdownRule:
    """1.0 when the response's last expression uses each of the label's numbers once and
    equals its target (`alignflow:countdown` labels, `TARGET:n1,n2,...`), else 0."""

    SCORES, LOGS = RULE_KEYS["countdown"]  # the keys `score` returns

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        responses = responses_of(queries, prompts)
        ok = _vec([float(countdown_correct(r, lab))
                   for r, lab in zip(responses, labels, strict=True)])
        return RewardOutput(ok, {"correct": ok})


def _format_rule(arg: str | None) -> FormatRule:
    return FormatRule(arg or "hash")


RULES: dict[str, Callable[[str | None], object]] = {
    "gsm8k": lambda arg: Gsm8kRule(style=_format_rule(arg).style),
    "correct": lambda arg: CorrectRule(),
    "format": _format_rule,
    "target": lambda arg: TargetRule(arg),
    "countdown": lambda arg: CountdownRule(),
}


def rule_source(spec: str):
    """`rule:<name>[:<arg>]` → a rule source; ConfigError listing the names otherwise."""
    name, arg = check_rule(spec)
    return RULES[name](arg)
