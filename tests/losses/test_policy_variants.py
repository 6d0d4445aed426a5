"""The policy-loss family (issue 44): CISPO, SAPO, GMPO, GPG, Clip-Cov, KL-Cov, DPPO (TV, KL),
each a registered variant on one signature through `policy_loss`. Three checks each: the
paper's formula as a slow per-token loop (value and gradient), the peers' numbers on the
same fixed tensors (`peer_policy_losses.json`: veRL 0.9.1's and TRL 1.16.0's formulas as
their sources write them, computed once and recorded), and one GRPO iteration on the tiny
model (`test_one_grpo_iteration_per_loss`)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from alignflow.tasks.losses.knobs import PolicyLossKnobs
from alignflow.tasks.losses.names import PolicyLossType
from alignflow.tasks.losses.policy import POLICY_LOSSES, policy_loss

PEER = json.loads((Path(__file__).parent / "peer_policy_losses.json").read_text())


def _fixed():
    t = {k: torch.tensor(PEER[k], dtype=torch.float64) for k in ("logp", "old", "adv", "mask")}
    return t["logp"], t["old"], t["adv"], t["mask"]


def _ours(name, low=0.2, high=0.28, agg="token-mean", **knobs):
    logp, old, adv, mask = _fixed()
    loss, _ = policy_loss(logp, old, adv, mask, name=name, eps_low=low, eps_high=high,
                          dual_clip=None, agg=agg, knobs=PolicyLossKnobs(**knobs))
    return loss.item()


@pytest.mark.parametrize(("peer", "name", "kw"), [
    ("verl_cispo", "cispo", {}),
    ("trl_cispo_eps_high_5", "cispo", {"low": 1.0, "high": 4.0}),  # TRL: clamp(ρ, max=5)
    ("verl_sapo", "sapo", {}), ("trl_sapo", "sapo", {}),
    ("verl_gpg", "gpg", {}),
    ("verl_geo_mean", "gmpo", {}),
    ("verl_dppo_tv", "dppo_tv", {"low": 0.05, "high": 0.08}),
    ("verl_dppo_kl", "dppo_kl", {"low": 0.005, "high": 0.01}),
    ("verl_kl_cov_ratio_0.2", "kl_cov", {"kl_cov_ratio": 0.2}),
    ("verl_clip_cov_all_in_band", "clip_cov", {"clip_cov_ratio": 1.0, "clip_cov_lb": 0.0,
                                               "clip_cov_ub": 1e9}),
])
def test_the_peers_numbers_on_the_same_tensors(peer, name, kw):
    # GMPO: veRL divides by Σm + 1e-8 (rows of 3..5 tokens): relative 1e-8 at most
    assert _ours(name, **kw) == pytest.approx(PEER["numbers"][peer], rel=1e-8, abs=1e-12)


def _case(seed=0):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(3, 4, generator=g, dtype=torch.float64) - 0.1
    logp = (old + 0.3 * torch.randn(3, 4, generator=g, dtype=torch.float64)).clamp(max=-1e-3)
    adv = torch.randn(3, 4, generator=g, dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 1, 1, 0]], dtype=torch.float64)
    return logp.requires_grad_(), old, adv, mask


def _slow(name, logp, old, adv, mask, lo=0.2, hi=0.28):
    """Each paper's per-token loss, one token at a time (plain floats where detached)."""
    out = torch.zeros_like(logp)
    for b in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            lp, o, a = logp[b, t], old[b, t], adv[b, t]
            rho = torch.exp(lp - o)
            if name == "cispo":  # sg(clip(ρ)) A log π
                out[b, t] = -min(max(rho.item(), 1 - lo), 1 + hi) * a * lp
            elif name == "sapo":  # −(4/τ) σ(τ(ρ−1)) A
                tau = 1.0 if a > 0 else 1.05
                out[b, t] = -(4 / tau) * torch.sigmoid(tau * (rho - 1)) * a
            elif name == "gpg":
                out[b, t] = -a * lp
            elif name == "dppo_tv":  # kept while p moved at most δ against A's sign
                moved = math.exp(lp.item()) - math.exp(o.item())
                keep = moved <= hi if a > 0 else moved >= -lo
                out[b, t] = -a * min(rho.item(), 20.0) * lp * keep
    return out


@pytest.mark.parametrize("name", ["cispo", "sapo", "gpg", "dppo_tv"])
def test_value_and_gradient_equal_the_papers_formula(name):
    logp, old, adv, mask = _case()
    ours, _ = policy_loss(logp, old, adv, mask, name=name, eps_low=0.2, eps_high=0.28,
                          agg="seq-mean-token-mean")
    per_row = (_slow(name, logp, old, adv, mask) * mask).sum(-1) / mask.sum(-1)
    ref = per_row.mean()
    (g_ours,) = torch.autograd.grad(ours, logp)
    (g_ref,) = torch.autograd.grad(ref, logp)
    assert torch.allclose(ours, ref, rtol=1e-12) and torch.allclose(g_ours, g_ref, rtol=1e-10)


def test_gmpo_is_the_geometric_mean_of_clipped_token_ratios_by_hand():
    # one row, A = +1 on both tokens, log-ratios (0.5, −0.1): the first clipped at ε_high =
    # 0.28 (A > 0 takes min(r, clip(r))), ρ = exp((0.28 − 0.1)/2) = e^0.09, ℓ = −e^0.09
    logp = torch.tensor([[0.5 - 1.0, -0.1 - 1.0]], dtype=torch.float64, requires_grad=True)
    old = torch.full((1, 2), -1.0, dtype=torch.float64)
    loss, _ = policy_loss(logp, old, torch.ones(1, 2, dtype=torch.float64),
                          torch.ones(1, 2, dtype=torch.float64), name="gmpo", eps_low=0.2,
                          eps_high=0.28)
    assert loss.item() == pytest.approx(-math.exp(0.09), rel=1e-12)
    loss.backward()  # only the unclipped token moves ρ: ∂ℓ/∂logp_1 = −ρ/2
    assert logp.grad[0].tolist() == pytest.approx([0.0, -math.exp(0.09) / 2], rel=1e-12)


def test_cispo_keeps_the_gradient_of_a_clipped_token_where_ppo_drops_it():
    logp = torch.tensor([[math.log(2.0)]], dtype=torch.float64, requires_grad=True)
    old, adv, mask = (torch.zeros(1, 1, dtype=torch.float64), torch.ones(1, 1, dtype=torch.float64),
                      torch.ones(1, 1, dtype=torch.float64))
    ppo, _ = policy_loss(logp, old, adv, mask, name="ppo")
    cispo, _ = policy_loss(logp, old, adv, mask, name="cispo", eps_low=0.2, eps_high=0.28)
    assert torch.autograd.grad(ppo, logp)[0].item() == 0.0
    assert torch.autograd.grad(cispo, logp)[0].item() == pytest.approx(-1.28)  # −sg(1.28)·A


def test_kl_cov_penalises_only_the_top_covariance_token():
    logp, old, adv, mask = (t.detach() for t in _case(1))
    plain = -(adv * (logp - old).exp())
    loss, _ = policy_loss(logp, old, adv, mask, name="kl_cov",
                          knobs=PolicyLossKnobs(kl_cov_ratio=1 / 9, kl_cov_coef=2.0))
    valid = mask.bool()
    cov = ((adv - adv[valid].mean()) * (logp - logp[valid].mean()))[valid]
    top = (logp - old).abs()[valid][cov.argmax()]  # ⌊9 · 1/9⌋ = 1 token
    assert loss.item() == pytest.approx(((plain * mask).sum() + 2.0 * top).item() / 9, rel=1e-12)


def test_every_config_name_is_registered_and_differs_from_ppo():
    from typing import get_args

    logp, old, adv, mask = (t.detach() for t in _case(2))
    ppo, _ = policy_loss(logp, old, adv, mask, name="ppo")
    for name in get_args(PolicyLossType):
        assert name in POLICY_LOSSES
        loss, metrics = policy_loss(logp, old, adv, mask, name=name,
                                    knobs=PolicyLossKnobs(clip_cov_ratio=0.5, clip_cov_lb=-1.0,
                                                          kl_cov_ratio=0.2))
        assert torch.isfinite(loss) and set(metrics) == {"clip_frac", "approx_kl", "ratio_mean"}
        assert name == "ppo" or not torch.allclose(loss, ppo), name
