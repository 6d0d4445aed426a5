"""Advantage estimators on a hand-worked 2 prompts × 2 samples batch, plus invariances."""

import math

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.advantages import (
    ESTIMATORS,
    GROUP_ESTIMATORS,
    AdvantageConfig,
    RolloutBatch,
    compute_advantages,
    gae,
    overlong_penalty,
)

torch.set_num_threads(1)

# Prompt A: samples 0, 1 ; prompt B: samples 2, 3 (n = 2, consecutive rows).
REWARD = torch.tensor([1.0, 0.0, 3.0, 1.0])
LENGTHS = torch.tensor([3, 2, 1, 2])
MASK = torch.arange(3)[None, :] < LENGTHS[:, None]  # 8 valid tokens


def _adv(estimator: str, **cfg) -> torch.Tensor:
    batch = RolloutBatch(REWARD, MASK, values=cfg.pop("values", None), kl=cfg.pop("kl", None))
    return compute_advantages(batch, AdvantageConfig(estimator=estimator, n=2, **cfg)).advantages


def _per_row(values: list[float]) -> torch.Tensor:
    """Broadcast one value per row over its valid tokens (0 on padding)."""
    return torch.tensor(values)[:, None] * MASK


def test_dr_grpo_by_hand() -> None:
    # means: A (1 + 0)/2 = 0.5, B (3 + 1)/2 = 2 → [0.5, −0.5, 1, −1] on every valid token
    assert torch.allclose(_adv("dr_grpo"), _per_row([0.5, -0.5, 1.0, -1.0]))


def test_group_norm_by_hand() -> None:
    # unbiased std: A √((.25 + .25)/1) = 0.707107 → ±0.5/0.707107 = ±0.707107
    #               B √((1 + 1)/1) = 1.414214 → ±1/1.414214 = ±0.707107
    s = 1 / math.sqrt(2)
    assert torch.allclose(_adv("group_norm"), _per_row([s, -s, s, -s]), atol=1e-6)
    assert torch.allclose(_adv("group_norm", no_std=True), _adv("dr_grpo"))


def test_rloo_by_hand() -> None:
    # n = 2: baseline is the other sample → [1 − 0, 0 − 1, 3 − 1, 1 − 3]
    assert torch.allclose(_adv("rloo"), _per_row([1.0, -1.0, 2.0, -2.0]))


def test_reinforce_baseline_by_hand() -> None:
    # r − mean_g = [.5, −.5, 1, −1] on 3 + 2 + 1 + 2 tokens:
    # μ = (1.5 − 1 + 1 − 2)/8 = −0.0625 ; E[x²] = (.75 + .5 + 1 + 2)/8 = 0.53125
    # σ² = 0.53125 − 0.00390625 = 0.52734375 ; σ = 0.7261844
    sigma = math.sqrt(0.52734375)
    want = [(v + 0.0625) / sigma for v in (0.5, -0.5, 1.0, -1.0)]  # .774597, −.602464, ...
    assert torch.allclose(_adv("reinforce_baseline"), _per_row(want), atol=1e-6)
    assert want[0] == pytest.approx(0.774597, abs=1e-6)


def test_reinforce_by_hand() -> None:
    # γ = 1: G_t = r on every token: [1×3, 0×2, 3×1, 1×2] ; μ = 8/8 = 1
    # σ² = (3·0 + 2·1 + 1·4 + 2·0)/8 = 0.75 → [0, −1.154701, 2.309401, 0]
    sigma = math.sqrt(0.75)
    assert torch.allclose(_adv("reinforce"), _per_row([0.0, -1 / sigma, 2 / sigma, 0.0]),
                          atol=1e-6)


def test_reinforce_discount_and_kl_in_reward() -> None:
    batch = RolloutBatch(torch.tensor([1.0]), torch.ones(1, 3, dtype=torch.bool))
    out = compute_advantages(batch, AdvantageConfig(estimator="reinforce", gamma=0.5))
    # tokens [0, 0, 1] → G = [0.25, 0.5, 1]
    assert torch.allclose(out.returns, torch.tensor([[0.25, 0.5, 1.0]]))
    # dr_grpo with β·KL in the reward: row 0 shaped 0.5, kl 0.1 per token, β = 0.1
    kl = torch.full((4, 3), 0.1)
    adv = _adv("dr_grpo", kl=kl, kl_coef=0.1)
    # tokens [−.01, −.01, .49] → suffix sums [.47, .48, .49]
    assert torch.allclose(adv[0], torch.tensor([0.47, 0.48, 0.49]))


def test_gae_by_hand() -> None:
    # T = 2, r = [0, 1], V = [.2, .4], γ = .9, λ = .5:
    # δ1 = 1 + 0 − .4 = .6 → A1 = .6 ; δ0 = 0 + .9·.4 − .2 = .16 → A0 = .16 + .45·.6 = .43
    out = gae(torch.tensor([[0.0, 1.0]]), torch.tensor([[0.2, 0.4]]), torch.ones(1, 2), 0.9, 0.5)
    assert torch.allclose(out.advantages, torch.tensor([[0.43, 0.6]]))
    assert torch.allclose(out.returns, torch.tensor([[0.63, 1.0]]))  # A + V


def _gae_loop(r, v, m, gamma, lambd):
    """Slow reference: per row, over valid tokens only, V after EOS = 0."""
    adv = torch.zeros_like(r)
    for b in range(r.shape[0]):
        steps = [t for t in range(r.shape[1]) if m[b, t]]
        running = 0.0
        for i in reversed(range(len(steps))):
            t = steps[i]
            nxt = float(v[b, steps[i + 1]]) if i + 1 < len(steps) else 0.0
            delta = float(r[b, t]) + gamma * nxt - float(v[b, t])
            running = delta + gamma * lambd * running
            adv[b, t] = running
    return adv, (adv + v) * m


def test_gae_matches_slow_loop_right_padded() -> None:
    g = torch.Generator().manual_seed(0)
    r, v = torch.randn(6, 9, generator=g), torch.randn(6, 9, generator=g)
    m = torch.arange(9)[None, :] < torch.tensor([9, 1, 4, 7, 2, 5])[:, None]
    out = gae(r, v, m, 0.97, 0.9)
    adv, ret = _gae_loop(r, v, m, 0.97, 0.9)
    assert torch.allclose(out.advantages, adv, atol=1e-5)
    assert torch.allclose(out.returns, ret, atol=1e-5)


def test_gae_estimator_is_whitened() -> None:
    g = torch.Generator().manual_seed(1)
    values = torch.randn(4, 3, generator=g)
    out = compute_advantages(RolloutBatch(REWARD, MASK, values=values),
                             AdvantageConfig(estimator="gae", gamma=1.0, lambd=0.95))
    valid = out.advantages[MASK]
    assert valid.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert valid.std(unbiased=False).item() == pytest.approx(1.0, abs=1e-5)
    with pytest.raises(ConfigError, match="values"):
        compute_advantages(RolloutBatch(REWARD, MASK), AdvantageConfig(estimator="gae"))


@pytest.mark.parametrize("estimator", GROUP_ESTIMATORS)
def test_group_estimators_permutation_invariant(estimator: str) -> None:
    g = torch.Generator().manual_seed(2)
    reward = torch.randn(12, generator=g)  # 3 prompts × 4 samples
    mask = torch.arange(5)[None, :] < torch.randint(1, 6, (12,), generator=g)[:, None]
    cfg = AdvantageConfig(estimator=estimator, n=4)
    base = compute_advantages(RolloutBatch(reward, mask), cfg).advantages
    # shuffle samples within each group and the groups themselves
    within = torch.cat([torch.randperm(4, generator=g) + 4 * k for k in range(3)])
    perm = within.reshape(3, 4)[torch.tensor([2, 0, 1])].reshape(-1)
    moved = compute_advantages(RolloutBatch(reward[perm], mask[perm]), cfg).advantages
    assert torch.allclose(moved, base[perm], atol=1e-6)
    assert (base[~mask] == 0).all()


def test_length_penalty_applied_before_group_baseline() -> None:
    # max 3, buffer 2: penalty starts past 3 − 2 = 1 token, −min(len − 1, 2)/2:
    # lengths [3, 2, 1, 2] → [−1, −.5, 0, −.5] → rewards [0, −.5, 3, .5]
    # means A −.25, B 1.75 → [.25, −.25, 1.25, −1.25]
    penalty = overlong_penalty(max_len=3, buffer_len=2, factor=1.0)
    adv = _adv("dr_grpo", length_penalty=penalty)
    assert torch.allclose(adv, _per_row([0.25, -0.25, 1.25, -1.25]))


def test_config_validation() -> None:
    with pytest.raises(ConfigError, match="rloo"):
        AdvantageConfig(estimator="ppo")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="gamma=1.0"):
        AdvantageConfig(estimator="group_norm", n=2, gamma=0.9)
    with pytest.raises(ConfigError, match="n >= 2"):
        AdvantageConfig(estimator="rloo", n=1)
    with pytest.raises(ConfigError, match="multiple of n=3"):
        compute_advantages(RolloutBatch(REWARD, MASK), AdvantageConfig(estimator="rloo", n=3))
    assert set(ESTIMATORS) == {"gae", "reinforce", "reinforce_baseline", "group_norm",
                               "dr_grpo", "rloo", "flash_reinforce", "on_policy_distill"}
