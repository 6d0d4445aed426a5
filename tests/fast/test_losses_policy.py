"""PPO policy / value / KL / entropy losses: hand cases, reference loops, accumulation."""

import math

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.losses import (
    AGGREGATIONS,
    kl_loss,
    policy_loss,
    value_loss,
)
from alignflow.tasks.losses.aggregate import Normaliser

torch.set_num_threads(1)
LN = math.log


def _hand_batch() -> tuple[torch.Tensor, ...]:
    # row 0: ratio 1.5, A=+1 (clipped at 1.2) | ratio 1.0, A=0.5 (inside)
    # row 1: ratio 0.5, A=−2 (clipped at 0.8) | padding
    old = torch.zeros(2, 2, dtype=torch.float64)
    logp = torch.tensor([[LN(1.5), 0.0], [LN(0.5), 7.0]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[1.0, 0.5], [-2.0, 9.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1], [1, 0]], dtype=torch.bool)
    return logp, old, adv, mask


def test_ppo_two_rows_by_hand() -> None:
    logp, old, adv, mask = _hand_batch()
    # per-token: −min(1.5·1, 1.2·1) = −1.2 ; −min(1·0.5, 1·0.5) = −0.5 ; −min(−1, −1.6) = 1.6
    loss, metrics = policy_loss(logp, old, adv, mask)
    assert loss.item() == pytest.approx((-1.2 - 0.5 + 1.6) / 3)  # token-mean = −0.033333
    loss.backward()
    # d/dlogp = −ρA where unclipped, 0 where clipped: only token (0,1): −0.5/3
    expected = torch.tensor([[0.0, -0.5 / 3], [0.0, 0.0]], dtype=torch.float64)
    assert torch.allclose(logp.grad, expected)
    assert metrics["clip_frac"].item() == pytest.approx(2 / 3)  # tokens (0,0) and (1,0)
    # approx_kl = mean(old − logp) = −(ln1.5 + 0 + ln0.5)/3 = 0.287682/3
    assert metrics["approx_kl"].item() == pytest.approx(0.0958940, abs=1e-6)
    assert metrics["ratio_mean"].item() == pytest.approx(1.0)  # (1.5 + 1 + 0.5)/3


def test_aggregation_modes_by_hand() -> None:
    logp, old, adv, mask = _hand_batch()
    seq, _ = policy_loss(logp, old, adv, mask, agg="seq-mean-token-mean")
    # row means: (−1.2 − 0.5)/2 = −0.85 and 1.6 → (−0.85 + 1.6)/2
    assert seq.item() == pytest.approx(0.375)
    norm, _ = policy_loss(logp, old, adv, mask, agg="seq-mean-token-sum-norm")
    # row sums / L_max=2: −0.85 and 0.8 → mean −0.025
    assert norm.item() == pytest.approx(-0.025)
    norm4, _ = policy_loss(logp, old, adv, mask, agg="seq-mean-token-sum-norm",
                           norm=Normaliser(max_len=4))
    assert norm4.item() == pytest.approx(-0.0125)
    with pytest.raises(ConfigError, match="token-mean"):
        policy_loss(logp, old, adv, mask, agg="sum")  # type: ignore[arg-type]


def test_separate_high_clip() -> None:
    logp, old, adv, mask = _hand_batch()
    loss, _ = policy_loss(logp, old, adv, mask, eps_high=0.28)
    # first token now clipped at 1.28: (−1.28 − 0.5 + 1.6)/3
    assert loss.item() == pytest.approx(-0.06)


def test_dual_clip_bound() -> None:
    old = torch.zeros(1, 3, dtype=torch.float64)
    logp = torch.tensor([[LN(4.0), LN(2.0), LN(4.0)]], dtype=torch.float64, requires_grad=True)
    adv = torch.tensor([[-2.0, -2.0, 1.0]], dtype=torch.float64)
    mask = torch.ones(1, 3, dtype=torch.bool)
    loss, _ = policy_loss(logp, old, adv, mask, name="dual_clip", dual_clip=3.0)
    # ρ=4, A=−2: ppo −min(−8, −2.4) = 8 > c|A| = 6 → 6 (grad 0)
    # ρ=2, A=−2: ppo 4 < 6 → 4, grad −ρA = 4 ; ρ=4, A=+1: −min(4, 1.2) = −1.2 (grad 0)
    assert loss.item() == pytest.approx((6 + 4 - 1.2) / 3)
    loss.backward()
    assert torch.allclose(logp.grad, torch.tensor([[0.0, 4 / 3, 0.0]], dtype=torch.float64))
    plain, _ = policy_loss(logp.detach(), old, adv, mask)
    assert plain.item() == pytest.approx((8 + 4 - 1.2) / 3)
    with pytest.raises(ConfigError, match="dual_clip"):
        policy_loss(logp, old, adv, mask, name="dual_clip", dual_clip=0.5)


def _reference_ppo(logp, old, adv, mask, eps=0.2, dual=None):
    """Slow loop: value and hand-derived gradient of the token-mean PPO loss."""
    n = int(mask.sum())
    total, grad = 0.0, torch.zeros_like(logp)
    for b in range(logp.shape[0]):
        for t in range(logp.shape[1]):
            if not mask[b, t]:
                continue
            r, a = math.exp(float(logp[b, t] - old[b, t])), float(adv[b, t])
            clipped = min(max(r, 1 - eps), 1 + eps)
            loss, g = (-r * a, -r * a) if r * a <= clipped * a else (-clipped * a, 0.0)
            if dual is not None and a < 0 and loss > -dual * a:
                loss, g = -dual * a, 0.0
            total += loss / n
            grad[b, t] = g / n
    return total, grad


@pytest.mark.parametrize("name", ["ppo", "dual_clip"])
def test_policy_loss_matches_reference_loop(name: str) -> None:
    g = torch.Generator().manual_seed(3)
    logp = (torch.randn(5, 7, generator=g, dtype=torch.float64) * 0.5).requires_grad_()
    old = torch.randn(5, 7, generator=g, dtype=torch.float64) * 0.5
    adv = torch.randn(5, 7, generator=g, dtype=torch.float64) * 2
    mask = torch.rand(5, 7, generator=g) > 0.3
    loss, _ = policy_loss(logp, old, adv, mask, name=name, dual_clip=1.5)
    loss.backward()
    ref_loss, ref_grad = _reference_ppo(logp.detach(), old, adv, mask,
                                        dual=1.5 if name == "dual_clip" else None)
    assert loss.item() == pytest.approx(ref_loss, abs=1e-12)
    assert torch.allclose(logp.grad, ref_grad, atol=1e-12)
    assert (logp.grad[~mask] == 0).all()


def _random_step(seed: int = 4):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([1, 6, 3, 8, 2, 5, 7, 4])
    mask = torch.arange(8)[None, :] < lengths[:, None]
    old = torch.randn(8, 8, generator=g, dtype=torch.float64) * 0.3
    adv = torch.randn(8, 8, generator=g, dtype=torch.float64)
    return old, adv, mask


@pytest.mark.parametrize("agg", list(AGGREGATIONS))
def test_microbatch_accumulation_equals_full_batch(agg: str) -> None:
    old, adv, mask = _random_step()
    full_logp = torch.zeros(8, 8, dtype=torch.float64, requires_grad=True)
    full, _ = policy_loss(full_logp, old, adv, mask, agg=agg)
    full.backward()

    acc_logp = torch.zeros(8, 8, dtype=torch.float64, requires_grad=True)
    norm = Normaliser(int(mask.sum()), 8, 8)
    total = 0.0
    for rows in torch.arange(8).split(2):  # 4 micro-batches × 2 rows
        part, _ = policy_loss(acc_logp[rows], old[rows], adv[rows], mask[rows], agg=agg, norm=norm)
        part.backward()
        total += part.item()
    assert total == pytest.approx(full.item(), abs=1e-12)
    assert torch.allclose(acc_logp.grad, full_logp.grad, atol=1e-12)


def test_microbatch_without_global_normaliser_differs() -> None:
    # Averaging micro-batch token-means is NOT the full-batch token-mean (uneven lengths).
    old, adv, mask = _random_step()
    logp = torch.zeros(8, 8, dtype=torch.float64)
    full, _ = policy_loss(logp, old, adv, mask)
    parts = [policy_loss(logp[r], old[r], adv[r], mask[r])[0] for r in torch.arange(8).split(2)]
    assert abs(sum(p.item() for p in parts) / 4 - full.item()) > 1e-3


def test_value_loss_by_hand() -> None:
    values = torch.tensor([[1.0, 2.0]], dtype=torch.float64, requires_grad=True)
    old = torch.tensor([[0.0, 2.0]], dtype=torch.float64)
    returns = torch.tensor([[2.0, 0.0]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    loss = value_loss(values, old, returns, mask, clip=0.5)
    # tok0: (1−2)² = 1 vs V_clip = 0 + 0.5 → (0.5−2)² = 2.25 → 2.25 ; tok1: (2−0)² = 4 both
    assert loss.item() == pytest.approx(0.5 * (2.25 + 4) / 2)  # 1.5625
    loss.backward()
    # tok0: clipped branch chosen, V_clip saturated → 0 ; tok1: ½·½·2·(V−R) = 1.0
    assert torch.allclose(values.grad, torch.tensor([[0.0, 1.0]], dtype=torch.float64))
    unclipped = value_loss(values, old, returns, mask, clip=None)
    assert unclipped.item() == pytest.approx(0.5 * (1 + 4) / 2)


def test_value_loss_matches_reference_loop() -> None:
    g = torch.Generator().manual_seed(5)
    v, old, ret = (torch.randn(4, 6, generator=g, dtype=torch.float64) for _ in range(3))
    mask = torch.rand(4, 6, generator=g) > 0.25
    got = value_loss(v, old, ret, mask, clip=0.2)
    terms = []
    for b in range(4):
        for t in range(6):
            if mask[b, t]:
                vc = float(old[b, t]) + min(max(float(v[b, t] - old[b, t]), -0.2), 0.2)
                terms.append(max((vc - float(ret[b, t])) ** 2, float(v[b, t] - ret[b, t]) ** 2))
    assert got.item() == pytest.approx(0.5 * sum(terms) / len(terms), abs=1e-12)


def test_kl_loss_by_hand_and_gradient_sign() -> None:
    logp = torch.tensor([[-1.0, -2.0]], dtype=torch.float64, requires_grad=True)
    ref = torch.tensor([[-1.0 - LN(2), -2.0 + LN(2)]], dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    loss = kl_loss(logp, ref, mask, estimator="k3")
    assert loss.item() == pytest.approx((0.193147 + 0.306853) / 2, abs=1e-6)  # 0.25
    loss.backward()
    # d k3/dx = 1 − e^{−x}: x=+ln2 → 0.5, x=−ln2 → −1 ; /2 tokens
    assert torch.allclose(logp.grad, torch.tensor([[0.25, -0.5]], dtype=torch.float64))


@pytest.mark.parametrize("which", ["value", "kl"])
@pytest.mark.parametrize("agg", list(AGGREGATIONS))
def test_value_and_kl_loss_accumulate_like_full_batch(which: str, agg: str) -> None:
    old, other, mask = _random_step(6)

    def loss_of(x, rows, norm=None):
        if which == "value":
            return value_loss(x[rows], old[rows], other[rows], mask[rows], clip=0.2, agg=agg,
                              norm=norm)
        return kl_loss(x[rows], old[rows], mask[rows], estimator="k3", agg=agg, norm=norm)

    full_x = torch.zeros(8, 8, dtype=torch.float64, requires_grad=True)
    full = loss_of(full_x, torch.arange(8))
    full.backward()
    acc_x = torch.zeros(8, 8, dtype=torch.float64, requires_grad=True)
    norm = Normaliser(int(mask.sum()), 8, 8)
    total = sum(loss_of(acc_x, rows, norm) for rows in torch.arange(8).split(2))
    total.backward()
    assert total.item() == pytest.approx(full.item(), abs=1e-12)
    assert torch.allclose(acc_x.grad, full_x.grad, atol=1e-12)


def test_value_loss_gradcheck() -> None:
    g = torch.Generator().manual_seed(7)
    v = torch.randn(3, 5, generator=g, dtype=torch.float64, requires_grad=True)
    old, ret = torch.randn(3, 5, generator=g, dtype=torch.float64), torch.randn(3, 5, generator=g,
                                                                                dtype=torch.float64)
    mask = torch.rand(3, 5, generator=g) > 0.3
    assert torch.autograd.gradcheck(lambda x: value_loss(x, old, ret, mask, clip=0.3), (v,))
    assert torch.autograd.gradcheck(lambda x: kl_loss(x, old, mask, estimator="k2"), (v,))
