"""The policy-loss variants after PPO and GSPO, each on the same signature
`fn(logp, old_logp, adv, mask, s: Surrogate) -> (B, T)` per-token loss (`knobs.py`).

ρ_t = exp(clamp(logp − old_logp, ±20)) is the token's importance ratio (`clipped.py`);
sg(·) stops the gradient. A sequence-level variant puts its row's loss on every token of
the row and is reduced per sequence (`loss.SEQUENCE_LEVEL`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from alignflow.tasks.losses.aggregate import masked_mean
from alignflow.tasks.losses.policy.clipped import (
    clipped_surrogate,
    gspo_tokens,
    importance_ratio,
)
from alignflow.tasks.losses.policy.knobs import Surrogate


def ppo(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, s: Surrogate) -> Tensor:
    """PPO-clip (Schulman et al. 2017), with the dual clip when `s.dual_clip` is set."""
    return clipped_surrogate(importance_ratio(logp, old_logp), adv, s.eps_low, s.eps_high,
                             s.dual_clip)


def gspo(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, s: Surrogate) -> Tensor:
    """GSPO: the clip on the row's geometric-mean ratio (`clipped.gspo_tokens`)."""
    return gspo_tokens(logp, old_logp, adv, mask, eps_low=s.eps_low, eps_high=s.eps_high,
                       dual_clip=s.dual_clip)


def cispo(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, s: Surrogate) -> Tensor:
    """CISPO (MiniMax-M1, arXiv 2506.13585): ℓ_t = −sg(clip(ρ_t, 1−ε_low, 1+ε_high))·A_t·logp_t.
    The ratio is clipped as a weight, so every token keeps a gradient (PPO drops clipped ones)."""
    weight = importance_ratio(logp, old_logp).clamp(1.0 - s.eps_low, 1.0 + s.eps_high)
    return -weight.detach() * adv * logp


def sapo(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, s: Surrogate) -> Tensor:
    """SAPO (arXiv 2511.20347): a soft gate instead of the clip,
    ℓ_t = −(4/τ)·σ(τ(ρ_t − 1))·A_t, τ = τ_pos if A_t > 0 else τ_neg; its gradient is
    ρ_t·sech²(τ(ρ_t − 1)/2)·A_t, 1 at ρ = 1, fading smoothly off-policy."""
    k = s.knobs
    tau = torch.where(adv > 0, torch.full_like(adv, k.sapo_tau_pos),
                      torch.full_like(adv, k.sapo_tau_neg))
    return -torch.sigmoid(tau * (importance_ratio(logp, old_logp) - 1.0)) * (4.0 / tau) * adv


def gmpo(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, s: Surrogate) -> Tensor:
    """GMPO (geometric-mean policy optimisation, arXiv 2507.20673): per row b,
    ρ_b = exp(mean_t sgn(Â_b)·min(sgn(Â_b)·r_t, sgn(Â_b)·clip(r_t, −ε_low, ε_high))),
    r_t = logp_t − old_t (a log-ratio clipped per token), Â_b = mean_t A_t, ℓ_b = −Â_b·ρ_b."""
    maskf = mask.to(logp.dtype)
    log_ratio = logp - old_logp
    seq_adv = masked_mean(adv, maskf, dim=-1)
    sign = torch.sign(adv)
    kept = sign * torch.minimum(sign * log_ratio,
                                sign * log_ratio.clamp(-s.eps_low, s.eps_high))
    ratio = torch.exp(masked_mean(kept, maskf, dim=-1))
    return (-seq_adv * ratio).unsqueeze(-1) * maskf


def gpg(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, s: Surrogate) -> Tensor:
    """GPG (group policy gradient, arXiv 2504.02546): the plain policy gradient, no ratio
    and no clip, ℓ_t = −A_t·logp_t."""
    return -adv * logp


def _dppo(logp: Tensor, old_logp: Tensor, adv: Tensor, valid: Tensor, s: Surrogate) -> Tensor:
    """DPPO's loss: ℓ_t = −A_t·sg(min(ρ_t, cap))·logp_t on tokens its trust region keeps."""
    weight = importance_ratio(logp, old_logp).clamp(max=s.knobs.dppo_ratio_cap).detach()
    return -adv * weight * logp * valid.detach().to(logp.dtype)


def dppo_tv(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, s: Surrogate) -> Tensor:
    """DPPO-Binary-TV (arXiv 2602.04879): a token is kept while its probability moved by at
    most δ in the direction its advantage pushes: A > 0: p − p_old <= δ_high; A <= 0:
    p − p_old >= −δ_low (δ: the clip bounds, read as divergence bounds)."""
    delta = logp.exp() - old_logp.exp()
    valid = torch.where(adv > 0, delta <= s.eps_high, delta >= -s.eps_low)
    return _dppo(logp, old_logp, adv, valid, s)


def dppo_kl(logp: Tensor, old_logp: Tensor, adv: Tensor, mask: Tensor, s: Surrogate) -> Tensor:
    """DPPO-Binary-KL: as dppo_tv with the binary KL of the sampled token,
    D = p_old·(log p_old − log p) + (1 − p_old)·log((1 − p_old + 1e-8)/(1 − p + 1e-8)),
    D <= δ_high (A > 0, unless p <= p_old) or D <= δ_low (A <= 0, unless p >= p_old)."""
    p, p_old = logp.exp(), old_logp.exp()
    binary = p_old * (old_logp - logp) + (1 - p_old) * torch.log((1 - p_old + 1e-8)
                                                                 / (1 - p + 1e-8))
    valid = torch.where(adv > 0, (binary <= s.eps_high) | (p <= p_old),
                        (binary <= s.eps_low) | (p >= p_old))
    return _dppo(logp, old_logp, adv, valid, s)
