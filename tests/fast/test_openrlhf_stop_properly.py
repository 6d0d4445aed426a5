"""ProRL's stop-properly penalty (`reward.stop_properly_penalty_coef`, OpenRLHF's
`--stop_properly_penalty_coef` from v0.9.2) against OpenRLHF v0.11.0's
`trainer/ppo_utils/length_penalty.py` `apply_length_penalties`: the overlong penalty is added
first, then a truncated sample's reward is scaled by coef (coef >= 0) or set to coef."""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch

from alignflow.flows.cli.run_config import build_config
from alignflow.tasks.rl.experience import Experience, compute
from alignflow.tasks.rl.learn_config import (
    AlgoConfig,
    EstimatorConfig,
    LearnSettings,
    RLRewardConfig,
)
from alignflow.tasks.rl.roles import ActorConfig, CriticConfig
from alignflow.tasks.trainers.optim import TrainConfig


def openrlhf_penalised(rewards, lengths, truncated, coef, max_new_tokens=None, buffer=None,
                       factor=1.0):
    out = list(rewards)
    if buffer is not None:
        expected = max_new_tokens - buffer
        for j, n in enumerate(lengths):
            exceed = min(n - expected, buffer)
            if exceed > 0:
                out[j] += -exceed / buffer * factor
    for j, cut in enumerate(truncated):
        if cut:
            out[j] = coef if coef < 0 else out[j] * coef
    return out


def _advantage_input(rewards, lengths, truncated, **reward):
    """The shaped rewards as the estimator sees them: REINFORCE++'s return at a row's
    first token (γ = 1, no KL) is the row's reward."""
    width = max(lengths)
    mask = torch.tensor([[1.0] * n + [0.0] * (width - n) for n in lengths])
    exp = Experience(keys=pa.table({"k": list(range(len(lengths)))}), prompts=[[1]] * 4,
                     responses=[[2] * n for n in lengths], old_logp=torch.zeros(4, width),
                     ref_logp=None, mask=mask, reward=torch.tensor(rewards), values=None,
                     truncated=torch.tensor(truncated))
    settings = LearnSettings(algo=AlgoConfig(advantage=EstimatorConfig(estimator="reinforce")),
                             actor=ActorConfig(), critic=CriticConfig(),
                             reward=RLRewardConfig(**reward), train=TrainConfig(),
                             packing=False, n_samples=1, temperature=1.0, max_len=8)
    return compute(exp, settings, kl_coef=0.0, moments=None).returns[:, 0].tolist()


@pytest.mark.parametrize("coef", [0.5, 0.0, -0.5])
def test_truncated_rewards_are_scaled_or_replaced(coef):
    rewards, lengths, truncated = [1.0, 1.0, -2.0, 0.5], [3, 8, 8, 6], [False, True, True, False]
    got = _advantage_input(rewards, lengths, truncated, stop_properly_penalty_coef=coef)
    assert got == pytest.approx(openrlhf_penalised(rewards, lengths, truncated, coef))


def test_after_the_overlong_penalty():
    rewards, lengths, truncated = [1.0, 1.0, -2.0, 0.5], [3, 8, 8, 6], [False, True, True, False]
    got = _advantage_input(rewards, lengths, truncated, stop_properly_penalty_coef=0.5,
                           overlong_buffer_len=4)
    # row 1: (1 − 1.0)·0.5 = 0; row 3: 0.5 − 2/4 = 0
    expected = openrlhf_penalised(rewards, lengths, truncated, 0.5, 8, 4)
    assert got == pytest.approx(expected) and expected == [1.0, 0.0, -1.5, 0.0]


def test_the_flag_of_every_release_and_its_range():
    for flags in (["--stop_properly_penalty_coef", "0.3"],
                  ["--reward.stop_properly_penalty_coef", "0.3"]):
        assert build_config("grpo", None, [], flags).reward.stop_properly_penalty_coef == 0.3
    with pytest.raises(Exception, match="stop_properly_penalty_coef"):
        build_config("grpo", None, ["reward.stop_properly_penalty_coef=1.5"], [])


def test_an_episode_is_never_truncated_for_the_penalty():
    from alignflow.tasks.rl.experience import _truncated

    roll = pa.table({"finish_reason": ["length", "stop", "length"],
                     "action_mask": [None, None, [1, 0, 1]]})
    assert _truncated(roll).tolist() == [True, False, False]
