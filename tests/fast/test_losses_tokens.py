"""Token-level losses: SFT/ptx CE, distillation, entropy, process RM."""

import math

import pytest
import torch
from torch.autograd import gradcheck

from alignflow.errors import ConfigError
from alignflow.tasks.losses import (
    entropy_from_logits,
    kd_loss,
    masked_entropy,
    prm_loss,
    ptx_loss,
    sft_loss,
    with_ptx,
)

torch.set_num_threads(1)
F64 = torch.float64
LN3 = math.log(3.0)


def _logits() -> torch.Tensor:
    # position 0: [0, 0] → p = [.5, .5] ; position 1: [0, ln3] → p = [.25, .75] ; 2: ignored
    return torch.tensor([[[0.0, 0.0], [0.0, LN3], [5.0, -5.0]]], dtype=F64, requires_grad=True)


def test_sft_and_ptx_by_hand() -> None:
    logits, labels = _logits(), torch.tensor([[0, 1, -100]])
    loss = sft_loss(logits, labels)
    # (−ln .5 − ln .75)/2 = (0.693147 + 0.287682)/2
    assert loss.item() == pytest.approx(0.4904146, abs=1e-6)
    assert ptx_loss(logits, labels).item() == loss.item()
    assert with_ptx(torch.tensor(1.0), torch.tensor(0.5), 0.1).item() == pytest.approx(1.05)
    loss.backward()
    # ∂CE/∂z = (p − onehot)/N : pos 0 [−.25, .25], pos 1 [.125, −.125], pos 2 ignored → 0
    expected = torch.tensor([[[-0.25, 0.25], [0.125, -0.125], [0.0, 0.0]]], dtype=F64)
    assert torch.allclose(logits.grad, expected)


def test_sft_matches_torch_cross_entropy_and_accumulates() -> None:
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(4, 5, 11, generator=g, dtype=F64)
    labels = torch.randint(0, 11, (4, 5), generator=g)
    labels[0, 3:] = -100
    labels[2, 1:] = -100
    ref = torch.nn.functional.cross_entropy(logits.reshape(-1, 11), labels.reshape(-1))
    assert sft_loss(logits, labels).item() == pytest.approx(ref.item(), abs=1e-12)
    n = int((labels != -100).sum())
    parts = sum(sft_loss(logits[r], labels[r], num_tokens=n) for r in torch.arange(4).split(1))
    assert parts.item() == pytest.approx(ref.item(), abs=1e-12)


def test_kd_by_hand() -> None:
    student = torch.tensor([[[0.0, 0.0], [0.0, LN3], [1.0, 2.0]]], dtype=F64)
    teacher = torch.tensor([[[0.0, LN3], [0.0, LN3], [9.0, 0.0]]], dtype=F64)
    labels = torch.tensor([[1, 0, -100]])
    # pos 0: CE −ln .5 = 0.693147 ; KL(t‖s) = .25 ln(.25/.5) + .75 ln(.75/.5) = 0.130812
    # pos 1: CE −ln .25 = 1.386294 ; KL = 0 ; α = .5 → (0.411980 + 0.693147)/2
    assert kd_loss(student, teacher, labels).item() == pytest.approx(0.5525633, abs=1e-6)
    # α = 1 is plain CE ; α = 0 is the mean forward KL
    assert kd_loss(student, teacher, labels, alpha=1.0).item() == pytest.approx(
        sft_loss(student, labels).item())
    assert kd_loss(student, teacher, labels, alpha=0.0).item() == pytest.approx(0.130812 / 2,
                                                                                 abs=1e-6)


def test_kd_gradcheck_and_zero_when_student_is_teacher() -> None:
    g = torch.Generator().manual_seed(1)
    s = torch.randn(2, 3, 5, generator=g, dtype=F64, requires_grad=True)
    t = torch.randn(2, 3, 5, generator=g, dtype=F64)
    labels = torch.tensor([[1, 4, -100], [0, -100, 2]])
    assert gradcheck(lambda x: kd_loss(x, t, labels, alpha=0.3), (s,))
    same = kd_loss(t.clone().requires_grad_(), t, labels, alpha=0.0)
    same.backward()
    assert same.item() == pytest.approx(0.0, abs=1e-12)


def test_entropy_by_hand() -> None:
    logits = _logits()
    h = entropy_from_logits(logits)
    # ln 2 = 0.693147 ; −(.25 ln .25 + .75 ln .75) = 0.562335
    assert torch.allclose(h[0, :2], torch.tensor([0.693147, 0.562335], dtype=F64), atol=1e-6)
    mask = torch.tensor([[1, 1, 0]], dtype=torch.bool)
    assert masked_entropy(logits, mask).item() == pytest.approx(0.627741, abs=1e-6)
    ref = -(torch.softmax(logits, -1) * torch.log_softmax(logits, -1)).sum(-1)
    assert torch.allclose(h, ref)
    assert gradcheck(lambda z: masked_entropy(z, mask), (logits,))


def _prm_batch() -> tuple[torch.Tensor, torch.Tensor]:
    # tokens: 5 = text, 9 = step placeholder; label ids 2 = '+', 3 = '−'
    input_ids = torch.tensor([[5, 9, 5, 9]])
    logits = torch.zeros(1, 4, 4, dtype=F64)
    logits[0, 1, 3] = LN3  # over [+, −]: p = [.25, .75]
    logits[0, 3, 3] = LN3
    return input_ids, logits


def test_prm_hard_labels_by_hand() -> None:
    input_ids, logits = _prm_batch()
    labels = torch.tensor([[-100, 2, -100, 3]])
    out = prm_loss(input_ids, logits, labels, placeholder_id=9, reward_token_ids=[2, 3])
    # step 1 label '+': −ln .25 = 1.386294 ; step 2 label '−': −ln .75 = 0.287682
    assert out.loss.item() == pytest.approx((1.386294 + 0.287682) / 2, abs=1e-6)
    assert out.accuracy.item() == 0.5
    with pytest.raises(ConfigError, match=r"\[2, 3\]"):
        prm_loss(input_ids, logits, torch.tensor([[-100, 1, -100, 3]]), placeholder_id=9,
                 reward_token_ids=[2, 3])


def test_prm_soft_labels_by_hand() -> None:
    input_ids, logits = _prm_batch()
    labels = torch.tensor([[-100.0, 1.0, -100.0, 0.25]], dtype=F64)
    out = prm_loss(input_ids, logits, labels, placeholder_id=9, reward_token_ids=[2, 3])
    # target [1, 0] vs p [.25, .75]: 1.386294 ; target [.25, .75] vs same p: entropy 0.562335
    assert out.loss.item() == pytest.approx((1.386294 + 0.562335) / 2, abs=1e-6)
    with pytest.raises(ConfigError, match="2 ids"):
        prm_loss(input_ids, logits, labels, placeholder_id=9)


def test_kd_accumulates_like_full_batch() -> None:
    g = torch.Generator().manual_seed(4)
    t = torch.randn(4, 3, 6, generator=g, dtype=F64)
    labels = torch.randint(0, 6, (4, 3), generator=g)
    labels[1, 1:] = -100
    full_s = torch.randn(4, 3, 6, generator=g, dtype=F64, requires_grad=True)
    acc_s = full_s.detach().clone().requires_grad_()
    full = kd_loss(full_s, t, labels)
    full.backward()
    n = int((labels != -100).sum())
    total = sum(kd_loss(acc_s[r], t[r], labels[r], num_tokens=n) for r in torch.arange(4).split(2))
    total.backward()
    assert total.item() == pytest.approx(full.item(), abs=1e-12)
    assert torch.allclose(acc_s.grad, full_s.grad, atol=1e-12)
