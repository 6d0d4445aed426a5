"""Token-level losses on logits: SFT / ptx cross-entropy, distillation, entropy.

Logits (B, T, V) and labels (B, T) must already be aligned (logits[:, t] predicts
labels[:, t]); positions whose label is `ignore_index` are left out. Every mean takes an
optional `num_tokens` so micro-batches sum to the full-batch loss (see aggregate.py).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from alignflow.tasks.losses.aggregate import masked_mean, token_mean, upcast

IGNORE_INDEX = -100


def token_logprobs(logits: Tensor, labels: Tensor, *, ignore_index: int = IGNORE_INDEX) -> Tensor:
    """log softmax(logits)[label] per position, at least float32; 0 where the label is ignored."""
    safe = labels.masked_fill(labels == ignore_index, 0)
    logp = torch.log_softmax(upcast(logits), dim=-1).gather(-1, safe.unsqueeze(-1)).squeeze(-1)
    return logp.masked_fill(labels == ignore_index, 0.0)


def sft_loss(
    logits: Tensor, labels: Tensor, *, ignore_index: int = IGNORE_INDEX,
    num_tokens: float | None = None,
) -> Tensor:
    """SFT token CE: −Σ_t log p(y_t) · m_t / N_tokens, m_t = [y_t ≠ ignore_index]."""
    mask = labels != ignore_index
    return token_mean(-token_logprobs(logits, labels, ignore_index=ignore_index), mask,
                      num_tokens=num_tokens)


def ptx_loss(
    logits: Tensor, labels: Tensor, *, ignore_index: int = IGNORE_INDEX,
    num_tokens: float | None = None,
) -> Tensor:
    """InstructGPT's pretraining-mix term: the SFT token CE on pretraining data."""
    return sft_loss(logits, labels, ignore_index=ignore_index, num_tokens=num_tokens)


def with_ptx(rl_loss: Tensor, ptx: Tensor, ptx_coef: float) -> Tensor:
    """L = L_RL + γ_ptx · L_ptx (γ_ptx = 0 turns the term off without a branch)."""
    return rl_loss + ptx_coef * ptx


def forward_kl(teacher_logits: Tensor, logits: Tensor) -> Tensor:
    """Per-position KL(p_t ‖ p_s) = Σ_v p_t(v) (log p_t(v) − log p_s(v)), at least float32."""
    t_logp = torch.log_softmax(upcast(teacher_logits), dim=-1)
    s_logp = torch.log_softmax(upcast(logits), dim=-1)
    return F.kl_div(s_logp, t_logp, reduction="none", log_target=True).sum(-1)


def kd_loss(
    logits: Tensor, teacher_logits: Tensor, labels: Tensor, *, alpha: float = 0.5,
    ignore_index: int = IGNORE_INDEX, num_tokens: float | None = None,
) -> Tensor:
    """Distillation: Σ_t m_t [α·CE(y_t) + (1−α)·KL(p_teacher ‖ p_student)] / N_tokens.

    OpenRLHF's KDLoss uses the cross-entropy −Σ p_t log p_s, which differs from this KL
    by the teacher's entropy: same gradient, different value.
    """
    mask = labels != ignore_index
    ce = -token_logprobs(logits, labels, ignore_index=ignore_index)
    per_token = alpha * ce + (1.0 - alpha) * forward_kl(teacher_logits, logits)
    return token_mean(per_token, mask, num_tokens=num_tokens)


def entropy_from_logits(logits: Tensor) -> Tensor:
    """H = logsumexp(z) − Σ_v softmax(z)_v · z_v per position, (B, T, V) → (B, T)."""
    z = upcast(logits)
    return torch.logsumexp(z, dim=-1) - (torch.softmax(z, dim=-1) * z).sum(-1)


def masked_entropy(logits: Tensor, mask: Tensor) -> Tensor:
    """Masked mean of per-token entropy, for logging or an entropy bonus."""
    return masked_mean(entropy_from_logits(logits), mask)
