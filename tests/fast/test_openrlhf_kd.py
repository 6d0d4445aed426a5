"""`alignflow run distill` (OpenRLHF's train_kd, last in v0.9.5) against a re-implementation
of OpenRLHF v0.9.5 `KDTrainer.fit`'s loss: gpt_loss·(1 − kd_coef) + distil_loss·kd_coef,
`GPTLMLoss` the token-mean CE and `KDLoss` the token mean of −Σ_v p_teacher·log p_student.

Two differences, both kept on purpose and said in docs/openrlhf.md: alignflow's KD term is
the KL (the CE less the teacher's entropy: the same gradient, a value lower by
kd_coef · the teacher's mean entropy), and it is taken at the positions whose next token is a
loss token, as the CE term; OpenRLHF's `KDLoss` masks its unshifted logits with the unshifted
labels, one position off from its own `GPTLMLoss`. The reference below aligns the positions.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from alignflow.tasks.offline.objectives import Context, distill

IGNORE = -100
V = 5


def openrlhf_kd_loss(logits, teacher_logits, labels, kd_coef: float) -> torch.Tensor:
    """v0.9.5: GPTLMLoss (shifted CE, token mean) and KDLoss on the same (shifted) positions."""
    shift_logits, shift_labels = logits[:, :-1], labels[:, 1:]
    gpt_loss = F.cross_entropy(shift_logits.reshape(-1, V), shift_labels.reshape(-1),
                               ignore_index=IGNORE)
    teacher_probs = F.softmax(teacher_logits, dim=-1, dtype=torch.float32)
    logprobs = F.log_softmax(shift_logits, dim=-1, dtype=torch.float32)
    x = torch.sum(teacher_probs * logprobs, dim=-1).view(-1)
    mask = (shift_labels != IGNORE).int().view(-1)
    distil_loss = -torch.sum(x * mask, dim=0) / torch.sum(mask, dim=0)
    return gpt_loss * (1 - kd_coef) + distil_loss * kd_coef


class _Fixed(torch.nn.Module):
    """A "model" whose logits are a parameter: the loss's gradient is the test's subject."""

    def __init__(self, logits: torch.Tensor) -> None:
        super().__init__()
        self.logits = torch.nn.Parameter(logits.clone())

    def forward(self, **_):
        return SimpleNamespace(logits=self.logits)


def _case():
    torch.manual_seed(0)
    ids = [[1, 2, 3, 4, 2], [1, 3, 3, 2]]  # the second is padded (pad id 0)
    masks = [[0, 0, 1, 1, 1], [0, 1, 1, 1]]  # loss tokens: response tokens
    labels = torch.tensor([[t if m else IGNORE for t, m in zip(i, mk, strict=True)]
                           + [IGNORE] * (5 - len(i)) for i, mk in zip(ids, masks, strict=True)])
    logits = torch.randn(2, 5, V, dtype=torch.float32)
    teacher = torch.randn(2, 4, V, dtype=torch.float32)  # one per predicted token
    return ids, masks, labels, logits, teacher


@pytest.mark.parametrize("kd_coef", [0.4, 0.0, 1.0])
def test_distill_loss_is_openrlhfs_mix(kd_coef):
    ids, masks, labels, logits, teacher = _case()
    ctx = Context(examples={"input_ids": ids, "loss_mask": masks}, pad_id=0,
                  spec=SimpleNamespace(loss=SimpleNamespace(kd_coef=kd_coef)),
                  teacher={0: teacher[0], 1: teacher[1, :3]})
    n_tokens = float((labels[:, 1:] != IGNORE).sum())
    ours_model, ref_logits = _Fixed(logits), logits.clone().requires_grad_()
    ours = distill(ours_model, [0, 1], ctx, n_tokens).loss
    ref = openrlhf_kd_loss(ref_logits, teacher, labels, kd_coef)
    ours.backward()
    ref.backward()
    assert torch.allclose(ours_model.logits.grad, ref_logits.grad, atol=1e-6)
    probs = F.softmax(teacher, dim=-1)
    entropy = -(probs * probs.log()).sum(-1)
    mean_entropy = float((entropy * (labels[:, 1:] != IGNORE)).sum()) / n_tokens
    assert ours.item() == pytest.approx(ref.item() - kd_coef * mean_entropy, abs=1e-5)


def test_the_mix_is_not_symmetric():
    """--kd_coef 0.4 weighs the KD term 0.4 and the CE 0.6 (not 0.5 / 0.5, not swapped)."""
    ids, masks, labels, logits, teacher = _case()
    ctx = Context(examples={"input_ids": ids, "loss_mask": masks}, pad_id=0,
                  spec=SimpleNamespace(loss=SimpleNamespace(kd_coef=0.4)),
                  teacher={0: teacher[0], 1: teacher[1, :3]})
    model = _Fixed(logits)
    distill(model, [0, 1], ctx, float((labels[:, 1:] != IGNORE).sum())).loss.backward()
    swapped = logits.clone().requires_grad_()
    openrlhf_kd_loss(swapped, teacher, labels, 0.6).backward()
    assert not torch.allclose(model.logits.grad, swapped.grad, atol=1e-4)
