"""KL estimators: hand values, non-negativity, unbiasedness, clamping, registry errors."""

import math

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.losses import KL_ESTIMATORS, approx_kl, k1, k2, k3

LN2 = math.log(2.0)


def _two_tokens() -> tuple[torch.Tensor, torch.Tensor]:
    # logp − ref = [+ln2, −ln2]
    logp = torch.tensor([-1.0, -2.0], dtype=torch.float64)
    ref = torch.tensor([-1.0 - LN2, -2.0 + LN2], dtype=torch.float64)
    return logp, ref


def test_k1_k2_k3_by_hand() -> None:
    logp, ref = _two_tokens()
    # k1 = x
    assert torch.allclose(k1(logp, ref), torch.tensor([LN2, -LN2], dtype=torch.float64))
    # k2 = x²/2 = 0.480453/2
    assert torch.allclose(k2(logp, ref), torch.tensor([0.2402265, 0.2402265], dtype=torch.float64))
    # k3 = e^{-x} − 1 + x: 0.5 − 1 + 0.693147 = 0.193147 ; 2 − 1 − 0.693147 = 0.306853
    assert torch.allclose(k3(logp, ref), torch.tensor([0.193147, 0.306853], dtype=torch.float64),
                          atol=1e-6)


def test_registry_dispatch_and_unknown_name() -> None:
    logp, ref = _two_tokens()
    for name, fn in KL_ESTIMATORS.items():
        assert torch.equal(approx_kl(logp, ref, name), fn(logp, ref))
    with pytest.raises(ConfigError, match="k1"):
        approx_kl(logp, ref, "k4")  # type: ignore[arg-type]


def test_k2_k3_non_negative() -> None:
    g = torch.Generator().manual_seed(0)
    logp, ref = torch.randn(1000, generator=g) * 3, torch.randn(1000, generator=g) * 3
    assert (k2(logp, ref) >= 0).all()
    assert (k3(logp, ref) >= 0).all()
    assert (k1(logp, ref) < 0).any()  # k1 is not


def test_k1_k3_unbiased_exactly_under_pi() -> None:
    # E_{a~π}[k(a)] over a categorical, summed exactly, equals KL(π‖ref) for k1 and k3.
    g = torch.Generator().manual_seed(1)
    logpi = torch.log_softmax(torch.randn(7, generator=g, dtype=torch.float64), -1)
    logref = torch.log_softmax(torch.randn(7, generator=g, dtype=torch.float64), -1)
    true_kl = (logpi.exp() * (logpi - logref)).sum()
    for fn in (k1, k3):
        assert torch.allclose((logpi.exp() * fn(logpi, logref)).sum(), true_kl)
    # k2 is biased
    assert not torch.allclose((logpi.exp() * k2(logpi, logref)).sum(), true_kl)


def test_the_estimate_is_clamped_to_ten_as_openrlhf_does() -> None:
    logp, ref = torch.tensor([15.0, -15.0, -10.0, 4.0, -4.0]), torch.zeros(5)
    assert torch.equal(k1(logp, ref), torch.tensor([10.0, -10.0, -10.0, 4.0, -4.0]))
    # k2 = x²/2 capped at 10 once |x| > sqrt(20); 4²/2 = 8 stays
    assert torch.equal(k2(logp, ref), torch.tensor([10.0, 10.0, 10.0, 8.0, 8.0]))
    # k3(15) = 14.0000003 -> 10; k3(-10) = e^10 - 11 = 22015.5 -> 10 (clamping x instead
    # would give 22015.5); k3(4) = e^-4 + 3 stays, k3(-4) = e^4 - 5 = 49.6 -> 10
    expected = torch.tensor([10.0, 10.0, 10.0, math.exp(-4) + 3, 10.0])
    assert torch.allclose(k3(logp, ref), expected)
    x = torch.tensor([-1e4, -30.0, 30.0], requires_grad=True)
    out = k3(x, torch.zeros(3))
    out.sum().backward()
    assert torch.equal(out.detach(), torch.full((3,), 10.0))
    assert torch.equal(x.grad, torch.zeros(3))  # finite: clamped, no inf * 0


def test_gradient_below_the_clamp_is_the_estimators() -> None:
    x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    k3(x, torch.zeros(2, dtype=torch.float64)).sum().backward()
    assert torch.allclose(x.grad, 1 - torch.exp(-x.detach()))  # d/dx (e^-x - 1 + x)


def test_half_precision_upcast() -> None:
    logp, ref = _two_tokens()
    assert k3(logp.bfloat16(), ref.bfloat16()).dtype == torch.float32
