"""DPO / IPO / cDPO / KTO and reward-model pairwise losses: hand values, gradients, signs."""

import math

import pytest
import torch
from torch.autograd import gradcheck

from alignflow.errors import ConfigError
from alignflow.tasks.losses import (
    DPO_LOSSES,
    REWARD_LOSSES,
    dpo_loss,
    kto_loss,
    mismatched_pairs,
    reward_loss,
)

torch.set_num_threads(1)
F64 = torch.float64


def _pairs() -> tuple[torch.Tensor, ...]:
    # row 0: h = (−1 + 3) − (−2 + 2) = 2 ; row 1: h = (−2 + 1) − (−1 + 1) = −1
    pi_c = torch.tensor([-1.0, -2.0], dtype=F64, requires_grad=True)
    pi_r = torch.tensor([-3.0, -1.0], dtype=F64)
    ref_c = torch.tensor([-2.0, -1.0], dtype=F64)
    ref_r = torch.tensor([-2.0, -1.0], dtype=F64)
    return pi_c, pi_r, ref_c, ref_r


def test_dpo_sigmoid_by_hand_with_rewards() -> None:
    pi_c, pi_r, ref_c, ref_r = _pairs()
    out = dpo_loss(pi_c, pi_r, ref_c, ref_r, beta=0.1)
    # −log σ(0.2) = log(1 + e^{−0.2}) = 0.598139 ; −log σ(−0.1) = log(1 + e^{0.1}) = 0.744397
    assert torch.allclose(out.loss, torch.tensor([0.598139, 0.744397], dtype=F64), atol=1e-6)
    # β(π_c − ref_c) = [0.1, −0.1] ; β(π_r − ref_r) = [−0.1, 0]
    assert torch.allclose(out.chosen_reward, torch.tensor([0.1, -0.1], dtype=F64))
    assert torch.allclose(out.rejected_reward, torch.tensor([-0.1, 0.0], dtype=F64))
    assert not out.chosen_reward.requires_grad
    out.loss.sum().backward()
    # ∂/∂π_c = −β σ(−βh): −0.1·σ(−0.2) = −0.0450166 ; −0.1·σ(0.1) = −0.0524979
    assert torch.allclose(pi_c.grad, torch.tensor([-0.0450166, -0.0524979], dtype=F64), atol=1e-7)


def test_ipo_and_cdpo_by_hand() -> None:
    pi_c, pi_r, ref_c, ref_r = _pairs()
    ipo = dpo_loss(pi_c, pi_r, ref_c, ref_r, variant="ipo", beta=0.1).loss
    assert torch.allclose(ipo, torch.tensor([9.0, 36.0], dtype=F64))  # (2 − 5)², (−1 − 5)²
    cdpo = dpo_loss(pi_c, pi_r, ref_c, ref_r, variant="cdpo", beta=0.1, label_smoothing=0.1).loss
    # −(1−ε)logσ(x) − ε logσ(−x) = −logσ(x) + εx : 0.598139 + 0.02 ; 0.744397 − 0.01
    assert torch.allclose(cdpo, torch.tensor([0.618139, 0.734397], dtype=F64), atol=1e-6)
    zero = dpo_loss(pi_c, pi_r, ref_c, ref_r, variant="cdpo", beta=0.1, label_smoothing=0.0)
    assert torch.allclose(zero.loss, dpo_loss(pi_c, pi_r, ref_c, ref_r).loss)


def test_dpo_config_errors() -> None:
    args = _pairs()
    with pytest.raises(ConfigError, match="sigmoid"):
        dpo_loss(*args, variant="hinge")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="cdpo"):
        dpo_loss(*args, variant="sigmoid", label_smoothing=0.1)
    with pytest.raises(ConfigError, match="beta"):
        dpo_loss(*args, beta=0.0)


@pytest.mark.parametrize("variant", list(DPO_LOSSES))
def test_dpo_variants_gradcheck_and_reference(variant: str) -> None:
    g = torch.Generator().manual_seed(0)
    x = [torch.randn(4, generator=g, dtype=F64, requires_grad=True) for _ in range(4)]
    extra = {"label_smoothing": 0.2} if variant == "cdpo" else {}

    def fn(*t):
        return dpo_loss(*t, variant=variant, beta=0.5, **extra).loss

    assert gradcheck(fn, tuple(x))
    got = fn(*x)
    for i in range(4):
        h = 0.5 * ((x[0][i] - x[1][i]) - (x[2][i] - x[3][i])).item()
        sig = -math.log(1 / (1 + math.exp(-h)))
        ref = {"sigmoid": sig, "ipo": (h / 0.5 - 1.0) ** 2,
               "cdpo": 0.8 * sig + 0.2 * -math.log(1 / (1 + math.exp(h)))}[variant]
        assert got[i].item() == pytest.approx(ref, abs=1e-12)


@pytest.mark.parametrize("variant", ["sigmoid", "cdpo"])
def test_dpo_sign_more_chosen_logp_lowers_loss(variant: str) -> None:
    pi_c, pi_r, ref_c, ref_r = (t.detach() for t in _pairs())
    extra = {"label_smoothing": 0.1} if variant == "cdpo" else {}
    before = dpo_loss(pi_c, pi_r, ref_c, ref_r, variant=variant, **extra).loss
    after = dpo_loss(pi_c + 0.5, pi_r, ref_c, ref_r, variant=variant, **extra).loss
    worse = dpo_loss(pi_c, pi_r + 0.5, ref_c, ref_r, variant=variant, **extra).loss
    assert (after < before).all() and (worse > before).all()


def test_dpo_batch_permutation_invariant() -> None:
    g = torch.Generator().manual_seed(1)
    x = [torch.randn(6, generator=g, dtype=F64) for _ in range(4)]
    perm = torch.randperm(6, generator=g)
    a = dpo_loss(*x).loss
    b = dpo_loss(*(t[perm] for t in x)).loss
    assert torch.equal(a[perm], b)


def test_kto_by_hand() -> None:
    pi_c, ref_c = torch.tensor([-1.0], dtype=F64), torch.tensor([-2.0], dtype=F64)  # lr_c = 1
    pi_r, ref_r = torch.tensor([-1.0], dtype=F64), torch.tensor([-1.5], dtype=F64)  # lr_r = .5
    pi_kl, ref_kl = torch.tensor([-1.0, -2.0], dtype=F64), torch.full((2,), -1.5, dtype=F64)
    out = kto_loss(pi_c, ref_c, pi_r, ref_r, pi_kl, ref_kl, beta=0.1)
    # z = max(0, mean(0.5, −0.5)) = 0 ; 1 − σ(0.1) = 0.475021 ; 1 − σ(−0.05) = 0.512497
    assert out.kl.item() == 0.0
    assert torch.allclose(out.loss, torch.tensor([0.475021, 0.512497], dtype=F64), atol=1e-6)
    assert torch.allclose(out.chosen_reward, torch.tensor([0.1], dtype=F64))
    weighted = kto_loss(pi_c, ref_c, pi_r, ref_r, pi_kl, ref_kl, beta=0.1, desirable_weight=1.33,
                        undesirable_weight=0.5)
    assert torch.allclose(weighted.loss, torch.tensor([1.33 * 0.475021, 0.5 * 0.512497],
                                                      dtype=F64), atol=1e-6)
    # negative KL estimate is clamped: diffs [−1, −3] → z = max(0, −2) = 0, same losses
    neg = kto_loss(pi_c, ref_c, pi_r, ref_r, torch.tensor([-1.0, -3.0], dtype=F64),
                   torch.zeros(2, dtype=F64), beta=0.1)
    assert neg.kl.item() == 0.0
    assert torch.equal(neg.loss, out.loss)
    # positive KL: diffs [1, 3] → z = 2 ; 1 − σ(0.1(1 − 2)) = 0.524979 ; 1 − σ(0.1(2 − .5))
    hi = kto_loss(pi_c, ref_c, pi_r, ref_r, torch.tensor([0.0, 1.0], dtype=F64),
                  torch.tensor([-1.0, -2.0], dtype=F64), beta=0.1)
    assert hi.kl.item() == pytest.approx(2.0)
    assert torch.allclose(hi.loss, torch.tensor([0.524979, 1 - 1 / (1 + math.exp(-0.15))],
                                                dtype=F64), atol=1e-6)


def test_kto_gradients_skip_kl_and_have_right_sign() -> None:
    pi_c = torch.tensor([-1.0, -0.5], dtype=F64, requires_grad=True)
    pi_r = torch.tensor([-1.0], dtype=F64, requires_grad=True)
    pi_kl = torch.tensor([0.0, 1.0], dtype=F64, requires_grad=True)
    out = kto_loss(pi_c, torch.zeros(2, dtype=F64), pi_r, torch.zeros(1, dtype=F64), pi_kl,
                   torch.zeros(2, dtype=F64))
    out.loss.mean().backward()
    assert pi_kl.grad is None or (pi_kl.grad == 0).all()  # reference point is detached
    assert (pi_c.grad < 0).all() and (pi_r.grad > 0).all()
    assert gradcheck(lambda c, r: kto_loss(c, torch.zeros(2, dtype=F64), r,
                                           torch.zeros(1, dtype=F64), pi_kl.detach(),
                                           torch.zeros(2, dtype=F64)).loss, (pi_c, pi_r))


def test_kto_empty_side() -> None:
    out = kto_loss(torch.tensor([-1.0]), torch.tensor([-2.0]), torch.zeros(0), torch.zeros(0),
                   torch.zeros(2), torch.zeros(2), beta=0.1)
    assert out.loss.shape == (1,)
    assert torch.equal(mismatched_pairs(4), torch.tensor([1, 2, 3, 0]))


def test_reward_pairwise_by_hand() -> None:
    r_c = torch.tensor([2.0, 0.0], dtype=F64, requires_grad=True)
    r_r = torch.tensor([1.0, 1.0], dtype=F64)
    loss = reward_loss(r_c, r_r)
    # −log σ(1) = 0.313262 ; −log σ(−1) = 1.313262
    assert torch.allclose(loss, torch.tensor([0.313262, 1.313262], dtype=F64), atol=1e-6)
    margin = reward_loss(r_c, r_r, margin=0.5)
    # −log σ(0.5) = 0.474077 ; −log σ(−1.5) = 1.701413
    assert torch.allclose(margin, torch.tensor([0.474077, 1.701413], dtype=F64), atol=1e-6)
    logexp = reward_loss(r_c, r_r, name="logexp")
    # log(1 + e^{r_r − r_c}) = log(1 + e^{−1}), log(1 + e^{1}): identical to the sigmoid form
    assert torch.allclose(logexp, loss)
    loss.sum().backward()
    # ∂/∂r_c = −σ(r_r − r_c) = −σ(−1), −σ(1)
    assert torch.allclose(r_c.grad, torch.tensor([-0.268941, -0.731059], dtype=F64), atol=1e-6)
    with pytest.raises(ConfigError, match="logexp"):
        reward_loss(r_c, r_r, name="hinge")  # type: ignore[arg-type]


@pytest.mark.parametrize("name", list(REWARD_LOSSES))
def test_reward_losses_gradcheck_and_stability(name: str) -> None:
    g = torch.Generator().manual_seed(2)
    r_c, r_r = (torch.randn(5, generator=g, dtype=F64, requires_grad=True) for _ in range(2))
    assert gradcheck(lambda a, b: reward_loss(a, b, name=name, margin=0.3), (r_c, r_r))
    big = reward_loss(torch.tensor([-500.0]), torch.tensor([500.0]), name=name)
    assert big.item() == pytest.approx(1000.0)  # no overflow to inf
