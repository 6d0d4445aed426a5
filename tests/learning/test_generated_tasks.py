"""The generated verifiable tasks (`alignflow:arith`, `alignflow:countdown`): the same rows
from the same seed, a held-out split no training row shares, labels that the exact-answer
rules accept for the reference answer and refuse for a wrong one."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.tasks.data.generated import GENERATED, forgot_carry, is_held_out
from alignflow.tasks.data.named import named_rows
from alignflow.tasks.rewards.countdown import countdown_correct, evaluate
from alignflow.tasks.rewards.registry import RewardConfig, build_reward

NAMES = ["arith", "arith-2", "arith-5", "countdown", "countdown-4"]


@pytest.mark.parametrize("name", NAMES)
def test_held_out_split_is_disjoint_and_decided_by_the_problem(name):
    train, test = named_rows(name, "train"), named_rows(name, "test")
    assert len(test) >= 20 and len(train) > len(test)
    assert not {r["input"] for r in train} & {r["input"] for r in test}
    assert all(is_held_out(r["input"]) for r in test)
    assert not any(is_held_out(r["input"]) for r in train)
    assert len({r["input"] for r in train}) == len(train)  # no problem twice


def test_rows_are_the_same_every_time_and_differ_by_difficulty():
    assert named_rows("arith", "test") == named_rows("arith-3", "test")
    assert named_rows("arith-3", "train")[:5] != named_rows("arith-4", "train")[:5]
    digits = {len(r["input"].split()[2]) + len(r["input"].split()[4].rstrip("?"))
              for r in named_rows("arith-6", "train")}
    assert digits == {6}
    assert named_rows("arith", None) == named_rows("arith", "train")


@pytest.mark.parametrize("name", [n for n in GENERATED if n.startswith("arith")])
def test_arith_labels_are_the_arithmetic(name):
    for row in named_rows(name, "test"):
        _, _, a, op, b = row["input"].rstrip("?").split()
        assert int(row["label"]) == (int(a) + int(b) if op == "+" else int(a) - int(b)) >= 0


def test_arith_slip_is_arith_taught_by_a_teacher_who_forgets_carries():
    for split in ("train", "test"):
        plain, slip = named_rows("arith-4", split), named_rows("arith-slip-4", split)
        assert [(r["input"], r["label"]) for r in slip] == \
            [(r["input"], r["label"]) for r in plain]  # the same problems, splits and labels
    wrong = [r for r in slip if r["output"] != r["label"]]
    assert 0.2 < len(wrong) / len(slip) < 0.5  # half the problems, those with a carry
    assert all(r["output"] == forgot_carry(r["input"]) for r in wrong)
    assert (forgot_carry("What is 47 + 8?"), forgot_carry("What is 51 - 2?")) == ("45", "59")
    assert named_rows("arith-slip", "train") == named_rows("arith-slip-3", "train")


@pytest.mark.parametrize("name", [n for n in GENERATED if n.startswith("countdown")])
def test_countdown_reference_answers_pass_the_rule(name):
    rows = named_rows(name, "test")
    assert all(countdown_correct(f"Answer: {r['output']} = {r['label'].split(':')[0]}",
                                 r["label"]) for r in rows)


def test_countdown_rule_refuses_wrong_and_unsafe_answers():
    label = "36:23,25,12"
    assert countdown_correct("23 + (25 - 12)", label)
    assert countdown_correct("I think (25 - 12) + 23 = 36.", label)
    assert countdown_correct("23 + 25 - 12", label)  # any order and grouping that reach it
    assert not countdown_correct("23 + 25 + 12", label)  # 60
    assert not countdown_correct("23 + 13", label)  # 13 is not given
    assert not countdown_correct("23 + 25 - 12 + 0", label)  # 0 is not given
    assert not countdown_correct("36", label)  # no expression
    assert not countdown_correct("__import__('os')", label)
    assert not countdown_correct("23 ** 2", label)
    assert evaluate("1 / 0") is None and evaluate("2 * (3") is None


def test_rules_score_exact_answers_only():
    reward = build_reward(RewardConfig(sources=("rule:countdown",)))
    out = reward.score(["Q (25 - 12) + 23", "Q (25 - 12) + 24"], ["Q ", "Q "],
                       ["36:23,25,12", "36:23,25,12"])
    assert out.scores["countdown"].tolist() == [1.0, 0.0]
    arith = build_reward(RewardConfig(sources=("rule:correct",)))
    out = arith.score(["Q 47 + 8 = 55", "Q 47 + 8 = 55 or 56", "Q #### 54"], ["Q "] * 3,
                      ["55"] * 3)
    assert out.rewards.tolist() == [1.0, 0.0, 0.0]  # the format earns nothing


def test_bad_split_is_one_clear_line():
    with pytest.raises(ConfigError, match=r"alignflow:arith has splits \['train', 'test'\]"):
        named_rows("arith", "validation")


def test_eval_correctness_is_the_answer_check_never_the_format():
    import torch

    from alignflow.tasks.rl.evaluate import correct_metrics, correctness

    t = torch.tensor
    assert correctness({"format": t([1.0, 1.0]), "correct": t([0.0, 1.0])}) == [0.0, 1.0]
    assert correctness({"gsm8k": t([1.1, 0.1]), "gsm8k/format": t([1.0, 1.0]),
                        "gsm8k/correct": t([1.0, 0.0])}) == [1.0, 0.0]
    assert correctness({"target": t([0.5]), "target/present": t([1.0])}) is None
    assert correct_metrics(["a", "a", "b"], [1.0, 0.0, 1.0]) == {
        "eval/a/correct": 0.5, "eval/b/correct": 1.0, "eval/correct": 2 / 3}
