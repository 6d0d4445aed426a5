"""The learn step's advantage pass on hand-made experience (no models, no store)."""

from __future__ import annotations

import pyarrow as pa
import pytest
import torch

from alignflow.tasks.rl.experience import Experience, compute
from alignflow.tasks.rl.learn_config import (
    AlgoConfig,
    EstimatorConfig,
    LearnSettings,
    RLRewardConfig,
)
from alignflow.tasks.rl.roles import ActorConfig, CriticConfig
from alignflow.tasks.trainers.optim import TrainConfig


def _settings(estimator: str, *, n: int = 2, max_len: int = 8, filtering: bool = False,
              no_std: bool = False, **reward) -> LearnSettings:
    algo = AlgoConfig(advantage=EstimatorConfig(estimator=estimator, no_std_norm=no_std),
                      dynamic_filtering_enable=filtering)
    return LearnSettings(algo=algo, actor=ActorConfig(), critic=CriticConfig(),
                         reward=RLRewardConfig(**reward), train=TrainConfig(), packing=False,
                         n_samples=n, temperature=1.0, max_len=max_len)


def _experience(lengths: list[int], rewards: list[float]) -> Experience:
    width = max(lengths)
    mask = torch.tensor([[1.0] * n + [0.0] * (width - n) for n in lengths])
    zeros = torch.zeros(len(lengths), width)
    return Experience(keys=pa.table({"k": list(range(len(lengths)))}), prompts=[[1]] * len(lengths),
                      responses=[[2] * n for n in lengths], old_logp=zeros, ref_logp=zeros,
                      mask=mask, reward=torch.tensor(rewards), values=None)


def test_overlong_penalty_shapes_the_group_advantage():
    # max_len 8, buffer 4: a 4-token response is not penalised, an 8-token one loses 1.0
    # rewards (0, 0) -> (0, -1); GRPO: mean -0.5, std (unbiased) 0.7071 -> (+0.7071, -0.7071)
    exp = _experience([4, 8], [0.0, 0.0])
    settings = _settings("group_norm", overlong_buffer_len=4)
    adv = compute(exp, settings, kl_coef=0.0, moments=None)
    assert adv.advantages[0, :4].tolist() == pytest.approx([0.70710677] * 4, abs=1e-5)
    assert adv.advantages[1].tolist() == pytest.approx([-0.70710677] * 8, abs=1e-5)
    assert adv.advantages[0, 4:].abs().sum() == 0  # padding carries nothing


def test_without_penalty_equal_rewards_give_zero_advantage():
    exp = _experience([4, 8], [0.0, 0.0])
    adv = compute(exp, _settings("group_norm"), kl_coef=0.0, moments=None)
    assert adv.advantages.abs().sum() == 0


def test_dynamic_filtering_keeps_groups_whose_mean_is_inside_the_range():
    exp = _experience([2] * 6, [0.5, 0.5, 1.0, 1.0, 0.0, 0.0])  # means 0.5, 1.0, 0.0
    adv = compute(exp, _settings("rloo", filtering=True), kl_coef=0.0, moments=None)
    assert adv.kept.tolist() == [True, True, False, False, False, False]  # (0, 1) strictly


def test_dynamic_filtering_drops_groups_with_one_reward():
    exp = _experience([2, 2, 2, 2], [1.0, 1.0, 0.0, 1.0])
    adv = compute(exp, _settings("rloo", filtering=True), kl_coef=0.0, moments=None)
    assert adv.kept.tolist() == [False, False, True, True]


def test_without_a_reference_advantages_are_the_same_and_kl_is_not_reported():
    """No KL term: the run skips the reference step; advantages equal those computed with
    a reference at β = 0, and no made-up KL reaches the metrics or the table."""
    from dataclasses import replace

    from alignflow.tasks.rl.experience import advantages_table

    exp = _experience([3, 2, 4, 1], [1.0, 0.0, 0.5, 0.25])
    settings = _settings("group_norm")
    with_ref = compute(exp, settings, kl_coef=0.0, moments=None)
    without = compute(replace(exp, ref_logp=None), settings, kl_coef=0.0, moments=None)
    assert torch.equal(with_ref.advantages, without.advantages)
    assert "kl" in with_ref.metrics and "kl" not in without.metrics
    keyed = replace(exp, keys=pa.table({"run_id": ["r"] * 4, "iteration": [0] * 4,
                                        "prompt_id": ["0", "0", "1", "1"],
                                        "sample_idx": [0, 1, 0, 1]}))
    table = advantages_table(keyed, without, "iter-0000/learn")
    assert table.column("kl").null_count == 4


def test_roles_hold_a_reference_only_when_a_kl_term_uses_it():
    from alignflow.flows.rl.config import RLConfig
    from alignflow.tasks.rl.learn_config import KLConfig

    def roles(**kl):
        return RLConfig(algo=AlgoConfig(kl=KLConfig(**kl))).roles()
    assert roles(init_coef=0.0) == ("actor", "reward")
    assert roles(init_coef=0.0, use_loss=True) == ("actor", "reward")  # β = 0: no loss term
    assert roles() == ("actor", "ref", "reward")  # OpenRLHF's β = 0.01
    assert roles(init_coef=0.01) == ("actor", "ref", "reward")
    assert roles(target=0.1) == ("actor", "ref", "reward")
    assert RLConfig(algo=AlgoConfig(kl=KLConfig(init_coef=0.0))).roles(critic=True) == (
        "actor", "critic", "reward")


def test_no_std_norm_stops_the_whitening_std_and_never_group_norms():
    """As OpenRLHF: group_norm keeps dividing by the group std; whitening only centres."""
    exp = _experience([2, 2, 2, 2], [1.0, 0.0, 3.0, 1.0])
    group = compute(exp, _settings("group_norm", no_std=True), kl_coef=0.0, moments=None)
    assert group.advantages[:, 0].tolist() == pytest.approx([0.7071068, -0.7071068] * 2)
    base = compute(exp, _settings("reinforce_baseline", no_std=True), kl_coef=0.0, moments=None)
    # r - group mean = (0.5, -0.5, 1, -1): already centred over the batch, so unchanged
    assert base.advantages[:, 0].tolist() == pytest.approx([0.5, -0.5, 1.0, -1.0])
    whitened = compute(exp, _settings("reinforce_baseline"), kl_coef=0.0, moments=None)
    assert whitened.advantages[:, 0].tolist() == pytest.approx(
        [0.6324555, -0.6324555, 1.2649111, -1.2649111], abs=1e-5)
