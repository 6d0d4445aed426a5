"""GSPO (`actor.policy_loss_type=gspo`, OpenRLHF's `--policy_loss_type gspo`): a hand-worked
two-row case and OpenRLHF's formula (v0.11.0 `models/loss.py` PolicyLoss, the same in v0.9.0
but for the clamp of the token count):

    log_ratio = logp − old                    (the rollout's log-probs with IS correction)
    ratio = exp(Σ_t log_ratio·m / max(Σ_t m, 1)).unsqueeze(-1) · m
    ℓ = −min(ratio·A, clip(ratio, 1−ε_low, 1+ε_high)·A)
    loss = mean over non-empty rows of Σ_t ℓ·m / Σ_t m      (token_level_loss = False)
"""

from __future__ import annotations

import math

import pytest
import torch

from alignflow.flows.cli.run_config import build_config
from alignflow.tasks.losses import policy_loss
from alignflow.tasks.losses.aggregate import Normaliser


def openrlhf_gspo(logp, old, adv, mask, eps_low=0.2, eps_high=0.2):
    ratio = ((logp - old) * mask).sum(-1) / mask.sum(-1).clamp(min=1)
    ratio = ratio.exp().unsqueeze(-1) * mask
    loss = -torch.min(ratio * adv, ratio.clamp(1 - eps_low, 1 + eps_high) * adv)
    counts = mask.sum(-1)
    seq = (loss * mask).sum(-1) / (counts + 1e-8)
    keep = (counts > 0).to(seq.dtype)
    return (seq * keep).sum() / keep.sum()


def test_two_rows_by_hand():
    """The ratio is the row's, not the token's; a row's tokens share its clip."""
    # row 0: log-ratios (ln 2, 0) -> ρ = √2 = 1.414 for both tokens, A = +1: clipped at 1.2
    # row 1: log-ratios (ln 0.5, padding) -> ρ = 0.5, A = −1: −min(−0.5, −0.8) = 0.8
    logp = torch.tensor([[math.log(2.0), 0.0], [math.log(0.5), 3.0]], dtype=torch.float64,
                        requires_grad=True)
    old = torch.zeros(2, 2, dtype=torch.float64)
    adv = torch.tensor([[1.0, 1.0], [-1.0, 5.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0], [1.0, 0.0]], dtype=torch.float64)
    loss, metrics = policy_loss(logp, old, adv, mask, name="gspo", dual_clip=None)
    assert loss.item() == pytest.approx((-1.2 + 0.8) / 2)  # per-row means, then their mean
    loss.backward()
    # both rows take their clipped surrogate (row 1: min(−0.5, −0.8) = −0.8): no gradient
    assert logp.grad.tolist() == [[0.0, 0.0], [0.0, 0.0]]
    assert metrics["clip_frac"].item() == pytest.approx(1.0)
    assert torch.allclose(loss.detach(), openrlhf_gspo(logp.detach(), old, adv, mask))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_value_and_gradient_equal_openrlhfs(seed):
    g = torch.Generator().manual_seed(seed)
    rows, width = 5, 7
    lengths = torch.randint(0, width + 1, (rows,), generator=g)
    mask = (torch.arange(width)[None] < lengths[:, None]).double()
    logp = (0.3 * torch.randn(rows, width, generator=g, dtype=torch.float64)).requires_grad_()
    old = 0.3 * torch.randn(rows, width, generator=g, dtype=torch.float64)
    adv = torch.randn(rows, width, generator=g, dtype=torch.float64)
    ours, _ = policy_loss(logp, old, adv, mask, name="gspo", eps_low=0.2, eps_high=0.28,
                          dual_clip=None)
    ref = openrlhf_gspo(logp, old, adv, mask, 0.2, 0.28)
    (g_ours,) = torch.autograd.grad(ours, logp)
    (g_ref,) = torch.autograd.grad(ref, logp)
    # OpenRLHF divides each row by its token count + 1e-8: a relative 1e-8 at most
    assert torch.allclose(ours, ref, rtol=1e-8, atol=0)
    assert torch.allclose(g_ours, g_ref, rtol=1e-8, atol=1e-15)


def test_the_flag_of_every_release_sets_the_key():
    for flags in (["--policy_loss_type", "gspo"], ["--actor.policy_loss_type", "gspo"]):
        assert build_config("grpo", None, [], flags).actor.policy_loss_type == "gspo"
    with pytest.raises(Exception, match="policy_loss_type"):
        build_config("grpo", None, ["actor.policy_loss_type=gpo"], [])


def test_gspo_with_is_correction_takes_its_ratio_against_the_behaviour_policy():
    """OpenRLHF: `log_ratio = log_probs − rollout_log_probs` when IS correction is on, and
    no IS weight: alignflow's behaviour log-probs are the rollout's."""
    import pyarrow as pa

    from alignflow.tasks.rl.experience import Experience
    from alignflow.tasks.rl.learn import _surrogate
    from alignflow.tasks.rl.learn_config import (
        AlgoConfig,
        EstimatorConfig,
        LearnSettings,
        RLRewardConfig,
    )
    from alignflow.tasks.rl.roles import ActorConfig, CriticConfig
    from alignflow.tasks.trainers.optim import TrainConfig

    g = torch.Generator().manual_seed(4)
    logp, behaviour, proximal = (torch.randn(3, 4, generator=g, dtype=torch.float64)
                                 for _ in range(3))
    adv, mask = torch.randn(3, 4, generator=g, dtype=torch.float64), torch.ones(3, 4)
    exp = Experience(keys=pa.table({"k": [0, 1, 2]}), prompts=[[1]] * 3, responses=[[1]] * 3,
                     old_logp=proximal, ref_logp=None, mask=mask, reward=torch.zeros(3),
                     values=None, behaviour_logp=behaviour)  # π_old: the trainer's (learn.py)
    algo = AlgoConfig(advantage=EstimatorConfig(is_correction_enable=True))
    settings = LearnSettings(algo=algo, actor=ActorConfig(policy_loss_type="gspo"),
                             critic=CriticConfig(), reward=RLRewardConfig(), train=TrainConfig(),
                             packing=False, n_samples=1, temperature=1.0, max_len=4)
    norm = Normaliser(12.0, 3, 4)
    loss, _ = _surrogate(logp, exp, [0, 1, 2], adv, mask, settings, norm)
    assert torch.allclose(loss, openrlhf_gspo(logp, behaviour, adv, mask.double()))


def test_an_unclipped_row_moves_every_token_by_its_share_of_the_ratio():
    # one row, log-ratios (0.1, −0.1): ρ = e^0 = 1, A = (1, 2): ℓ = −(ρ·1 + ρ·2)/2 = −1.5;
    # ∂ℓ/∂logp_t = −Σ_s A_s · ρ/T / T = −3/(2·2) = −0.75 for both tokens (ρ' = ρ/T each)
    logp = torch.tensor([[0.1, -0.1]], dtype=torch.float64, requires_grad=True)
    loss, _ = policy_loss(logp, torch.zeros(1, 2, dtype=torch.float64),
                          torch.tensor([[1.0, 2.0]], dtype=torch.float64),
                          torch.ones(1, 2, dtype=torch.float64), name="gspo", dual_clip=None)
    assert loss.item() == pytest.approx(-1.5)
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-0.75, -0.75])
