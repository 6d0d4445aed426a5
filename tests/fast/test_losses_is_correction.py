"""Importance-sampling correction: a hand-worked two-row case, slow reference loops for value
and gradient, on-policy = no correction, micro-batch accumulation, errors."""

import math

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.losses.aggregate import Normaliser
from alignflow.tasks.losses.is_correction import IS_CORRECTIONS, is_weights
from alignflow.tasks.losses.policy import policy_loss

torch.set_num_threads(1)
LN = math.log


def corrected_policy_loss(logp, old, behaviour, adv, mask, *, kind="tis", low=0.5, high=5.0,
                          **kw):
    """The PPO loss against `old` with each token weighted by the IS correction from
    `behaviour` (`policy_loss(..., weights=is_weights(...))`, as the learner calls it)."""
    w, is_metrics = is_weights(old, behaviour, mask, kind=kind, low=low, high=high)
    loss, metrics = policy_loss(logp, old, adv, mask, weights=w, **kw)
    return loss, metrics | is_metrics


def _hand() -> tuple[torch.Tensor, ...]:
    """π_old = 0 everywhere; μ such that e^r = [2, 0.25, 1] and [8, 4, pad]."""
    old = torch.zeros(2, 3, dtype=torch.float64)
    behaviour = -torch.tensor([[LN(2), LN(0.25), 0.0], [LN(8), LN(4), 0.0]], dtype=torch.float64)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    return old, behaviour, mask


@pytest.mark.parametrize("kind,expected", [
    ("tis", [[2.0, 0.5, 1.0], [5.0, 4.0, 0.0]]),        # clamped into [0.5, 5]
    ("icepop", [[2.0, 0.0, 1.0], [0.0, 4.0, 0.0]]),     # outside [0.5, 5] dropped
    # geometric means 0.5^(1/3) = 0.794 (kept, unclamped) and √32 = 5.66 (row dropped)
    ("seq-mask-tis", [[2.0, 0.25, 1.0], [0.0, 0.0, 0.0]]),
])
def test_weights_by_hand(kind, expected) -> None:
    old, behaviour, mask = _hand()
    w, _ = is_weights(old, behaviour, mask, kind=kind, low=0.5, high=5.0)
    assert torch.allclose(w, torch.tensor(expected, dtype=torch.float64))


def test_metrics_and_loss_by_hand() -> None:
    old, behaviour, mask = _hand()
    w, m = is_weights(old, behaviour, mask, kind="tis", low=0.5, high=5.0)
    assert m["is_weight_mean"].item() == pytest.approx(12.5 / 5)
    assert m["is_trunc_frac"].item() == pytest.approx(2 / 5)  # 0.25 → 0.5 and 8 → 5
    assert m["is_mismatch_kl"].item() == pytest.approx(-LN(16) / 5)  # mean(μ − π_old)
    # logp = old (ratio 1), so each token's PPO loss is −A: Σ w·(−A) / 5 tokens
    logp = old.clone().requires_grad_(True)
    adv = torch.tensor([[1.0, 1.0, 1.0], [-1.0, 2.0, 9.0]], dtype=torch.float64)
    loss, metrics = corrected_policy_loss(logp, old, behaviour, adv, mask, kind="tis")
    assert loss.item() == pytest.approx((-2 - 0.5 - 1 + 5 - 8) / 5)
    loss.backward()
    expected = torch.tensor([[-2.0, -0.5, -1.0], [5.0, -8.0, 0.0]], dtype=torch.float64) / 5
    assert torch.allclose(logp.grad, expected)
    assert metrics["clip_frac"].item() == 0.0 and "is_weight_mean" in metrics


def _slow_weight(kind: str, r: list[float], m: list[bool], t: int, low: float,
                 high: float) -> float:
    if not m[t]:
        return 0.0
    rt = max(-20.0, min(20.0, r[t]))
    if kind == "tis":
        return min(max(math.exp(rt), low), high)
    if kind == "icepop":
        return math.exp(rt) if low <= math.exp(rt) <= high else 0.0
    valid = [max(-20.0, min(20.0, x)) for x, keep in zip(r, m, strict=True) if keep]
    seq = math.exp(sum(valid) / len(valid))
    return math.exp(rt) if low <= seq <= high else 0.0


@pytest.mark.parametrize("kind", list(IS_CORRECTIONS))
def test_against_a_slow_reference(kind) -> None:
    g = torch.Generator().manual_seed(7)
    old = torch.randn(4, 6, generator=g, dtype=torch.float64) * 0.8
    behaviour = torch.randn(4, 6, generator=g, dtype=torch.float64) * 0.8
    logp = (old + 0.1 * torch.randn(4, 6, generator=g, dtype=torch.float64)).requires_grad_(True)
    adv = torch.randn(4, 6, generator=g, dtype=torch.float64)
    mask = torch.rand(4, 6, generator=g) > 0.3
    loss, _ = corrected_policy_loss(logp, old, behaviour, adv, mask, kind=kind, low=0.7,
                                    high=1.6)
    loss.backward()
    ref_logp = logp.detach().clone().requires_grad_(True)
    total, n = torch.zeros((), dtype=torch.float64), int(mask.sum())
    for b in range(4):
        r = (old[b] - behaviour[b]).tolist()
        m = mask[b].tolist()
        for t in range(6):
            if not m[t]:
                continue
            ratio = torch.exp(ref_logp[b, t] - old[b, t])
            ppo = -torch.minimum(ratio * adv[b, t], ratio.clamp(0.8, 1.2) * adv[b, t])
            total = total + _slow_weight(kind, r, m, t, 0.7, 1.6) * ppo
    (total / n).backward()
    assert loss.item() == pytest.approx((total / n).item(), rel=1e-12)
    assert torch.allclose(logp.grad, ref_logp.grad, atol=1e-12)


@pytest.mark.parametrize("kind", list(IS_CORRECTIONS))
def test_on_policy_tokens_are_not_corrected(kind) -> None:
    """μ = π_old: every weight is 1, so the loss is the uncorrected PPO loss."""
    g = torch.Generator().manual_seed(3)
    old = torch.randn(3, 5, generator=g)
    logp = old + 0.2 * torch.randn(3, 5, generator=g)
    adv = torch.randn(3, 5, generator=g)
    mask = torch.ones(3, 5, dtype=torch.bool)
    mask[2, 3:] = False
    corrected, m = corrected_policy_loss(logp, old, old.clone(), adv, mask, kind=kind)
    plain, _ = policy_loss(logp, old, adv, mask)
    assert corrected.item() == pytest.approx(plain.item(), abs=1e-7)
    assert m["is_trunc_frac"].item() == 0.0 and m["is_weight_mean"].item() == 1.0


@pytest.mark.parametrize("kind", list(IS_CORRECTIONS))
def test_micro_batches_add_up_to_the_whole_batch(kind) -> None:
    g = torch.Generator().manual_seed(11)
    old, behaviour = torch.randn(8, 5, generator=g), torch.randn(8, 5, generator=g)
    adv = torch.randn(8, 5, generator=g)
    mask = torch.rand(8, 5, generator=g) > 0.2
    logp = (old + 0.1).requires_grad_(True)
    whole, _ = corrected_policy_loss(logp, old, behaviour, adv, mask, kind=kind, low=0.3)
    whole.backward()
    grad, logp.grad = logp.grad.clone(), None
    n, parts = float(mask.sum()), torch.zeros(())
    for rows in torch.arange(8).split(2):
        part, _ = corrected_policy_loss(logp[rows], old[rows], behaviour[rows], adv[rows],
                                        mask[rows], kind=kind, low=0.3,
                                        norm=Normaliser(num_tokens=n))
        part.backward()
        parts = parts + part.detach()
    assert parts.item() == pytest.approx(whole.item(), abs=1e-6)
    assert torch.allclose(logp.grad, grad, atol=1e-7)


def test_extreme_ratios_stay_finite() -> None:
    old = torch.tensor([[0.0, 0.0]])
    behaviour = torch.tensor([[-500.0, 500.0]])  # e^{±500} would overflow float32
    w, m = is_weights(old, behaviour, torch.ones(1, 2, dtype=torch.bool), kind="icepop")
    assert torch.isfinite(w).all() and w.tolist() == [[0.0, 0.0]]
    assert torch.isfinite(m["is_mismatch_kl"])


def test_bad_settings_are_config_errors() -> None:
    old, behaviour, mask = _hand()
    with pytest.raises(ConfigError, match="expected one of"):
        is_weights(old, behaviour, mask, kind="clip")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="low < high"):
        is_weights(old, behaviour, mask, low=2.0, high=1.0)
