"""IS correction as OpenRLHF 0.11.2 takes it (`models/loss.py` PolicyLoss, #1339): a gate reads
a statistic per unit (token, or the sequence's mean) and drops (mask) or clamps (clip) units
outside [low, high]. The oracle below is that formula, re-derived on fixed tensors:

    r = old − rollout (detached), w_tok = e^r
    ratio gating: stat = e^r (token) or exp(masked mean of r) (seq)
    binary_kl / tv: p = e^rollout, q = e^old (clamped to [1e-6, 1 − 1e-6]);
        binary_kl = p log(p/q) + (1−p) log((1−p)/(1−q)); tv = |p − q|; seq: masked mean
    clip: coef = clamp(stat, low, high); mask: coef = w_tok · 1[low <= stat <= high]
    loss = agg(coef · ℓ_ppo)
"""

from __future__ import annotations

import math

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.losses.aggregate import masked_mean
from alignflow.tasks.losses.is_correction import is_weights
from alignflow.tasks.losses.policy import policy_loss

KINDS = {("token", "clip"): "tis", ("token", "mask"): "icepop", ("seq", "mask"): "seq-mask-tis"}


def oracle_coef(old, rollout, mask, level, mode, gating, low, high):
    r = old - rollout
    if gating == "ratio":
        stat = masked_mean(r, mask, dim=-1)[:, None] if level == "seq" else r
        stat = stat.exp()
    else:
        p, q = rollout.exp().clamp(1e-6, 1 - 1e-6), old.exp().clamp(1e-6, 1 - 1e-6)
        stat = (p * (p / q).log() + (1 - p) * ((1 - p) / (1 - q)).log() if gating == "binary_kl"
                else (p - q).abs())
        if level == "seq":
            stat = masked_mean(stat, mask, dim=-1)[:, None]
    if mode == "clip":
        return stat.clamp(low, high)
    return torch.where((stat >= low) & (stat <= high), r.exp(), torch.zeros_like(r))


def _tensors(seed=0):
    g = torch.Generator().manual_seed(seed)
    old = -torch.rand(4, 6, generator=g, dtype=torch.float64) * 2  # log p in (−2, 0]
    rollout = old + 0.3 * torch.randn(4, 6, generator=g, dtype=torch.float64)
    rollout = rollout.clamp(max=-1e-3)
    logp = old + 0.1 * torch.randn(4, 6, generator=g, dtype=torch.float64)
    adv = torch.randn(4, 6, generator=g, dtype=torch.float64)
    mask = torch.ones(4, 6, dtype=torch.float64)
    mask[1, 4:] = 0
    mask[3, 2:] = 0
    return logp, old, rollout, adv, mask


CASES = [("token", "clip", "ratio", 0.8, 1.25), ("token", "mask", "ratio", 0.8, 1.25),
         ("seq", "mask", "ratio", 0.9, 1.1), ("token", "mask", "binary_kl", 0.0, 0.02),
         ("seq", "mask", "binary_kl", 0.0, 0.01), ("token", "mask", "tv", 0.0, 0.1),
         ("seq", "mask", "tv", 0.0, 0.08)]


@pytest.mark.parametrize(("level", "mode", "gating", "low", "high"), CASES)
def test_each_is_mode_weights_as_openrlhfs_formula(level, mode, gating, low, high):
    logp, old, rollout, adv, mask = _tensors()
    want = oracle_coef(old, rollout, mask, level, mode, gating, low, high) * mask
    got, _ = is_weights(old, rollout, mask, kind=KINDS[(level, mode)], low=low, high=high,
                        gating=gating)
    assert torch.allclose(got, want, rtol=1e-12, atol=0)
    assert int((want == 0).sum() - (mask == 0).sum()) > 0 or mode == "clip"  # the gate acts
    ppo = -torch.minimum((logp - old).exp() * adv, (logp - old).exp().clamp(0.8, 1.2) * adv)
    loss, _ = policy_loss(logp, old, adv, mask, eps_low=0.2, eps_high=0.2, weights=got)
    assert torch.allclose(loss, (want * ppo * mask).sum() / mask.sum(), rtol=1e-12)


def test_openrlhfs_hand_worked_binary_kl_and_tv_cases():
    """Token 0: μ = 1/3, π = 1 (far), token 1: μ = π = 1/2: token binary_kl drops token 0;
    tv: 0.6 vs 0.5 dropped at δ = 0.05, 0.52 vs 0.5 kept with weight 0.52 / 0.5."""
    logp = torch.tensor([[0.0, math.log(0.5)]], dtype=torch.float64)
    mu = torch.tensor([[-math.log(3.0), math.log(0.5)]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.float64)
    w, _ = is_weights(logp, mu, mask, kind="icepop", low=0.0, high=0.05, gating="binary_kl")
    assert w.tolist() == [[0.0, 1.0]]
    w, _ = is_weights(logp, mu, mask, kind="seq-mask-tis", low=0.0, high=3e-3,
                      gating="binary_kl")
    assert w.tolist() == [[0.0, 0.0]]
    pi = torch.tensor([[math.log(0.6), math.log(0.52)]], dtype=torch.float64)
    half = torch.full((1, 2), math.log(0.5), dtype=torch.float64)
    w, _ = is_weights(pi, half, mask, kind="icepop", low=0.0, high=0.05, gating="tv")
    assert w[0, 0] == 0 and w[0, 1].item() == pytest.approx(0.52 / 0.5, rel=1e-12)


@pytest.mark.parametrize(("kind", "gating", "low"), [("tis", "tv", 0.0),
                                                     ("icepop", "binary_kl", 0.5)])
def test_a_divergence_gate_masks_with_an_upper_bound_only(kind, gating, low):
    x = torch.zeros(1, 2)
    with pytest.raises(ConfigError, match="is_correction_"):
        is_weights(x, x, torch.ones(1, 2), kind=kind, low=low, high=5.0, gating=gating)


def test_one_threshold_is_an_upper_bound_as_openrlhf_reads_it():
    from alignflow.flows.cli.run_config import build_config

    for sets in (["algo.advantage.is_correction_threshold=3"],
                 ["algo.advantage.is_correction_threshold=[3]"]):
        cfg = build_config("grpo", None, sets, [])
        assert cfg.algo.advantage.is_correction_threshold == (0.0, 3.0)
    cfg = build_config("grpo", None, [], ["--algo.advantage.is_correction_threshold", "2.5"])
    assert cfg.algo.advantage.is_correction_threshold == (0.0, 2.5)
