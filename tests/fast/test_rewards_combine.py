"""Combining sources with weights, naming, the spec registry and DAPO group filtering."""

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.rewards import (
    CombinedReward,
    RewardConfig,
    RewardOutput,
    RewardSource,
    build_reward,
    build_source,
    filter_groups,
)
from alignflow.tasks.rewards.registry import split_name
from alignflow.tasks.rewards.rules import Gsm8kRule, TargetRule
from tests.fixtures.code import allow


class Fixed:
    def __init__(self, values, scores=None, logs=None):
        self.values, self.scores, self.logs = values, scores or {}, logs or {}

    def score(self, queries, prompts, labels):
        t = torch.tensor
        return RewardOutput(t(self.values), {k: t(v) for k, v in self.scores.items()},
                            {k: t(v) for k, v in self.logs.items()})


ARGS = (["q1", "q2", "q3"], ["q", "q", "q"], [None, None, None])


def test_weighted_sum_and_names():
    a = Fixed([1.0, 0.0, 2.0], scores={"part": [1.0, 1.0, 0.0]}, logs={"len": [3.0, 4.0, 5.0]})
    b = Fixed([0.5, -1.0, 0.0])
    out = CombinedReward({"a": a, "b": b}, {"a": 2.0, "b": 0.5}).score(*ARGS)
    assert out.rewards.tolist() == [2.25, -0.5, 4.0]
    assert out.scores["a"].tolist() == [1.0, 0.0, 2.0]
    assert out.scores["b"].tolist() == [0.5, -1.0, 0.0]
    assert out.scores["a/part"].tolist() == [1.0, 1.0, 0.0]
    assert list(out.extra_logs) == ["a/len"]
    assert out.extra_logs["a/len"].tolist() == [3.0, 4.0, 5.0]
    assert set(out.scores) == {"a", "b", "a/part"}


def test_default_weights_are_one():
    out = CombinedReward({"a": Fixed([1.0, 2.0, 3.0]), "b": Fixed([1.0, 1.0, 1.0])}).score(*ARGS)
    assert out.rewards.tolist() == [2.0, 3.0, 4.0]


def test_unknown_weight_and_empty_refused():
    with pytest.raises(ConfigError, match=r"reward_weights name unknown sources \['c'\]"):
        CombinedReward({"a": Fixed([0.0] * 3)}, {"c": 1.0})
    with pytest.raises(ConfigError, match="no reward sources"):
        CombinedReward({})


def test_sources_follow_the_protocol():
    assert isinstance(Gsm8kRule(), RewardSource)
    assert isinstance(CombinedReward({"a": Fixed([0.0])}), RewardSource)


def test_filter_groups_dapo():
    rewards = torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.5, 0.5, 0.5000001])
    mask = filter_groups(rewards, 3)
    assert mask.tolist() == [False, True, False, True]
    assert filter_groups(rewards, 1).tolist() == [False] * 12  # a group of one never varies
    assert mask.repeat_interleave(3).sum().item() == 6
    with pytest.raises(ConfigError, match=r"\(12,\) rewards do not split into groups of n=5"):
        filter_groups(rewards, 5)


def test_split_name():
    assert split_name("rule:gsm8k") == ("gsm8k", "rule:gsm8k")
    assert split_name("acc=rule:target:x") == ("acc", "rule:target:x")
    assert split_name("http://h:1/score?a=b") == ("remote", "http://h:1/score?a=b")
    assert split_name("/x/my_reward.py") == ("my_reward", "/x/my_reward.py")


def test_build_reward_from_specs(tmp_path):
    path = tmp_path / "lenfn.py"
    path.write_text("def reward_func(q, p, l):\n    return [float(len(x)) for x in q]\n")
    allow(path)
    cfg = RewardConfig(sources=("rule:gsm8k", "t=rule:target:7", str(path)),
                       weights=(1.0, 2.0, 0.1))
    reward = build_reward(cfg)
    assert list(reward.sources) == ["gsm8k", "t", "lenfn"]
    assert isinstance(reward.sources["t"], TargetRule)
    out = reward.score(["Q: #### 7", "Q: 8"], ["Q: ", "Q: "], ["7", "7"])
    # gsm8k: 1.1 / 0 ; target '7' covers 1 of 6 chars / 0 ; lengths 9 / 4
    assert torch.allclose(out.rewards, torch.tensor([1.1 + 2 / 6 + 0.9, 0.4]))
    assert out.scores["gsm8k/correct"].tolist() == [1.0, 0.0]


def test_config_and_spec_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"'weights': expected one weight per reward source \(1: rule:gsm8k\)"):
        RewardConfig(sources=("rule:gsm8k",), weights=(1.0, 2.0))
    with pytest.raises(ConfigError, match=r"share the name\(s\) \['gsm8k'\]"):
        build_reward(RewardConfig(sources=("rule:gsm8k", "rule:gsm8k")))
    with pytest.raises(ConfigError, match="'nothing-here': expected a rule"):
        build_source("nothing-here")
    assert build_source("http://127.0.0.1:9/x").url == "http://127.0.0.1:9/x"
