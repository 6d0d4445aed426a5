"""Rule rewards: GSM8K answer extraction and checking, answer format, the toy target rule."""

from decimal import Decimal

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.rewards.answers import (
    extract_answer,
    extract_label,
    is_correct,
    target_fraction,
)
from alignflow.tasks.rewards.rules import (
    CorrectRule,
    FormatRule,
    Gsm8kRule,
    TargetRule,
    rule_source,
)

EXTRACT_CASES = [
    ("She has 3 + 4 = 7 apples.\n#### 7", "7"),
    ("#### 1,234", "1234"),
    ("Total is 2,000,000 dollars\n#### 2,000,000", "2000000"),
    ("It costs $18.00 in all. #### $18", "18"),
    ("We get \\boxed{42} as the result.", "42"),
    ("Thus \\boxed{ 1,050 }", "1050"),
    ("Answer: \\boxed{\\text{12}}", "12"),
    ("First 5, then 6. The answer is 11.", "11"),
    ("So the final answer is: $72.", "72"),
    ("The answer is **30** apples", "30"),
    ("He walks 3 miles, then 4 more, so 7 miles", "7"),
    ("Half of 5 is 2.5", "2.5"),
    ("The temperature fell to -4 degrees", "-4"),
    ("10 - 5 = 5", "5"),
    # preference order: #### beats boxed beats "answer is" beats last number
    ("\\boxed{9} but really #### 10 and 11", "10"),
    ("The answer is 8, checked: \\boxed{12} 99", "12"),
    ("The answer is 8, then I counted 99 sheep", "8"),
    ("#### 3 ... #### 4", "4"),  # the last marker wins
]


@pytest.mark.parametrize(("response", "expected"), EXTRACT_CASES)
def test_extract_answer(response, expected):
    assert extract_answer(response) == Decimal(expected)


@pytest.mark.parametrize("response", ["", "I do not know.", "#### ", "\\boxed{x}", "answer is ?"])
def test_extract_answer_none(response):
    assert extract_answer(response) is None


@pytest.mark.parametrize(("response", "label", "ok"), [
    ("#### 72", "72", True),
    ("#### 72.0", "72", True),
    ("#### 72.00", "72", True),
    ("#### 1,000", "1000", True),
    ("#### 1000", "1,000", True),
    ("#### $5", "5", True),
    ("#### 73", "72", False),
    ("#### 7.2", "72", False),
    ("The answer is 0.5", "0.5", True),
    ("\\boxed{18}", "Janet sells 16 - 3 - 4 = 9 eggs ... 9 * 2 = 18\n#### 18", True),
    ("no number here", "5", False),
    ("#### 5", None, False),
    ("#### 5", "five", False),
])
def test_is_correct(response, label, ok):
    assert is_correct(response, label) is ok


def test_extract_label_full_solution():
    assert extract_label("48/2 = 24 clips in May.\n#### 72") == Decimal(72)
    assert extract_label(" 1,234 ") == Decimal(1234)
    assert extract_label(None) is None


def _score(rule, responses, labels=None, prompt="Q: how many? A: "):
    queries = [prompt + r for r in responses]
    return rule.score(queries, [prompt] * len(responses), labels or [None] * len(responses))


def test_gsm8k_rule_weights_and_components():
    responses = ["3 + 4 = 7\n#### 7", "It is \\boxed{7}", "#### 8", "seven", "the answer is 7"]
    out = _score(Gsm8kRule(), responses, ["7"] * 5)
    assert out.rewards.dtype == torch.float32
    assert torch.allclose(out.rewards, torch.tensor([1.1, 1.0, 0.1, 0.0, 1.0]))
    assert out.scores["format"].tolist() == [1.0, 0.0, 1.0, 0.0, 0.0]
    assert out.scores["correct"].tolist() == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert out.extra_logs["answer_found"].tolist() == [1.0, 1.0, 1.0, 0.0, 1.0]
    custom = _score(Gsm8kRule(format_weight=0.5, correct_weight=2.0), responses[:3], ["7"] * 3)
    assert custom.rewards.tolist() == [2.5, 2.0, 0.5]


def test_rules_read_only_the_response():
    """A number in the prompt must not count as the model's answer."""
    out = _score(CorrectRule(), ["I am not sure"], ["12"], prompt="Q: 12 eggs, how many? A: ")
    assert out.rewards.tolist() == [0.0]
    fmt = _score(FormatRule(), ["no marker"], prompt="Example: #### 3\nQ: ...")
    assert fmt.rewards.tolist() == [0.0]


def test_format_rule_styles():
    responses = ["#### 12", "\\boxed{12}", "12", "####", "#### twelve"]
    assert _score(FormatRule(), responses).rewards.tolist() == [1, 0, 0, 0, 0]
    assert _score(FormatRule("boxed"), responses).rewards.tolist() == [0, 1, 0, 0, 0]


def test_target_rule():
    assert target_fraction("abab", "ab") == 1.0
    assert target_fraction("xxab", "ab") == 0.5
    assert target_fraction("", "ab") == 0.0
    assert target_fraction("xyz", "ab") == 0.0
    out = _score(TargetRule("cat"), ["cat cat", "dog", "a cat!"], prompt="say cat: ")
    assert torch.allclose(out.rewards, torch.tensor([6 / 7, 0.0, 0.5]))
    assert out.scores["present"].tolist() == [1.0, 0.0, 1.0]


def test_rule_registry():
    assert isinstance(rule_source("rule:gsm8k"), Gsm8kRule)
    assert rule_source("rule:format:boxed") == FormatRule("boxed")
    assert rule_source("rule:target:a:b") == TargetRule("a:b")
    with pytest.raises(ConfigError, match="unknown reward rule 'nope'.*rule:gsm8k"):
        rule_source("rule:nope")
    with pytest.raises(ConfigError, match="needs a target string"):
        rule_source("rule:target")
    with pytest.raises(ConfigError, match="unknown format style 'latex'"):
        rule_source("rule:format:latex")


def test_mismatched_lengths_refused():
    with pytest.raises(ConfigError, match="2 queries, 1 prompts, 2 labels"):
        Gsm8kRule().score(["a", "b"], ["a"], [None, None])
