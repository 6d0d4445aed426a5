"""Reward shaping, returns, whitening, running moments and KL controllers."""

import json

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.advantages import (
    RunningMoments,
    compute_token_rewards,
    discounted_returns,
    last_valid_index,
    overlong_penalty,
    whiten,
)
from alignflow.tasks.rl.kl_penalty import AdaptiveKLController, FixedKLController

torch.set_num_threads(1)


def test_token_rewards_by_hand() -> None:
    reward = torch.tensor([1.0, 0.0])
    kl = torch.tensor([[0.1, 0.2, 0.3], [0.5, 0.5, 9.0]])
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    out = compute_token_rewards(reward, kl, mask, kl_coef=0.1)
    # row 0: [−.01, −.02, 1 − .03] ; row 1: [−.05, 0 − .05, padding 0]
    assert torch.allclose(out, torch.tensor([[-0.01, -0.02, 0.97], [-0.05, -0.05, 0.0]]))
    # kl_coef = 0 (KL as a loss instead) drops the term
    assert torch.equal(compute_token_rewards(reward, kl, mask, kl_coef=0.0),
                       torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]]))


def test_token_rewards_clip_left_padding_and_hook() -> None:
    mask = torch.tensor([[0, 1, 1], [1, 0, 0]], dtype=torch.bool)  # EOS at 2 and 0
    assert torch.equal(last_valid_index(mask), torch.tensor([2, 0]))
    out = compute_token_rewards(torch.tensor([15.0, -12.0]), None, mask)
    assert torch.equal(out, torch.tensor([[0.0, 0.0, 10.0], [-10.0, 0.0, 0.0]]))  # ±10 clip
    # hook runs before clipping: 15 − 2·len → [11 → 10, −14 → −10]
    hooked = compute_token_rewards(torch.tensor([15.0, -12.0]), None, mask,
                                   length_penalty=lambda n: -2.0 * n)
    assert torch.equal(hooked[:, [2, 0]].diagonal(), torch.tensor([10.0, -10.0]))
    assert torch.equal(compute_token_rewards(torch.tensor([15.0, 0.0]), None, mask,
                                             reward_clip=None)[0, 2], torch.tensor(15.0))


def test_overlong_penalty_values() -> None:
    # L = 4, buffer 2: free up to 2 tokens, −min(len − 2, 2)/2 · factor
    pen = overlong_penalty(max_len=4, buffer_len=2, factor=1.0)
    assert torch.equal(pen(torch.tensor([1, 2, 3, 4, 5])),
                       torch.tensor([0.0, 0.0, -0.5, -1.0, -1.0]))
    with pytest.raises(ConfigError, match="buffer_len"):
        overlong_penalty(max_len=4, buffer_len=5)


def test_discounted_returns_match_loop() -> None:
    g = torch.Generator().manual_seed(0)
    r = torch.randn(3, 6, generator=g)
    m = torch.arange(6)[None, :] < torch.tensor([6, 2, 4])[:, None]
    got = discounted_returns(r, m, 0.9)
    for b in range(3):
        for t in range(6):
            want = sum(0.9 ** (k - t) * float(r[b, k]) for k in range(t, 6) if m[b, k])
            assert float(got[b, t]) == pytest.approx(want if m[b, t] else 0.0, abs=1e-5)


def test_whiten_mean_zero_std_one_ignores_padding() -> None:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(5, 7, generator=g) * 3 + 2
    m = torch.rand(5, 7, generator=g) > 0.4
    w = whiten(x, m)
    assert w[m].mean().item() == pytest.approx(0.0, abs=1e-6)
    assert w[m].std(unbiased=False).item() == pytest.approx(1.0, abs=1e-5)
    assert (w[~m] == 0).all()
    garbage = torch.where(m, x, torch.full_like(x, 1e6))
    assert torch.equal(whiten(garbage, m), w)
    centred = whiten(x, m, use_std=False)
    assert torch.allclose(centred[m], x[m] - x[m].mean(), atol=1e-5)


def test_whiten_by_hand() -> None:
    # [1, 3] valid, 100 padded: μ = 2, σ = 1 → [−1, 1, 0]
    w = whiten(torch.tensor([[1.0, 3.0, 100.0]]), torch.tensor([[1, 1, 0]]))
    assert torch.equal(w, torch.tensor([[-1.0, 1.0, 0.0]]))


def test_running_moments_chunks_equal_full_and_json_roundtrip() -> None:
    g = torch.Generator().manual_seed(2)
    data = torch.randn(100, generator=g, dtype=torch.float64) * 2 + 5
    rm = RunningMoments()
    for chunk in data.split([1, 30, 9, 60]):
        rm.update(chunk)
    assert rm.count == 100
    assert rm.mean == pytest.approx(data.mean().item(), abs=1e-12)
    assert rm.std == pytest.approx(data.std(unbiased=False).item(), abs=1e-12)
    back = RunningMoments.from_state(json.loads(json.dumps(rm.state())))
    assert back == rm
    assert torch.allclose(back.normalize(data), (data - rm.mean) / (rm.std + 1e-8))


def test_running_moments_by_hand() -> None:
    rm = RunningMoments()
    assert rm.update(torch.tensor([1.0, 3.0])) == (2.0, 1.0)
    rm.update(torch.tensor([5.0]))  # all: [1, 3, 5] → μ 3, σ² = 8/3
    assert (rm.mean, rm.var, rm.count) == (pytest.approx(3.0), pytest.approx(8 / 3), 3.0)


def test_adaptive_kl_controller_by_hand() -> None:
    # β = 0.1, target 6, horizon 10000, 512 samples per step
    ctl = AdaptiveKLController(value=0.1, target=6.0, horizon=10000)
    # KL 12: error clip(12/6 − 1) = 0.2 → ×(1 + 0.2·512/10000) = ×1.01024
    assert ctl.update(12.0, 512) == pytest.approx(0.101024)
    ctl = AdaptiveKLController(value=0.1, target=6.0, horizon=10000)
    assert ctl.update(3.0, 512) == pytest.approx(0.098976)  # error −0.5 → −0.2
    ctl = AdaptiveKLController(value=0.1, target=6.0, horizon=10000)
    assert ctl.update(6.6, 512) == pytest.approx(0.100512)  # error 0.1 unclipped
    assert json.loads(json.dumps(ctl.state()))["value"] == pytest.approx(0.100512)
    with pytest.raises(ConfigError, match="target"):
        AdaptiveKLController(value=0.1, target=0.0, horizon=10)


def test_fixed_kl_controller() -> None:
    ctl = FixedKLController(0.05)
    assert ctl.update(100.0, 512) == 0.05
    assert ctl.state() == {"value": 0.05}


def test_discounted_returns_gamma_one_fast_path_matches_loop() -> None:
    g = torch.Generator().manual_seed(3)
    r = torch.randn(4, 9, generator=g, dtype=torch.float64)
    m = torch.rand(4, 9, generator=g) > 0.3
    fast = discounted_returns(r, m, 1.0)
    slow = torch.tensor([[sum(float(r[b, k]) for k in range(t, 9) if m[b, k]) if m[b, t] else 0.0
                          for t in range(9)] for b in range(4)], dtype=torch.float64)
    assert torch.allclose(fast, slow, atol=1e-12)
    # suffix sums by hand: row [1, 2, 3] → [6, 5, 3]
    assert torch.equal(discounted_returns(torch.tensor([[1.0, 2.0, 3.0]]), torch.ones(1, 3), 1.0),
                       torch.tensor([[6.0, 5.0, 3.0]]))
