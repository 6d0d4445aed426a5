"""Offline preference losses on summed sequence log-probs: DPO, IPO, cDPO and KTO.

Inputs are (B,) log-probs of whole responses under the policy (pi_*) and the frozen
reference (ref_*), c = chosen, r = rejected. Each variant returns the per-pair loss (B,);
the caller takes the mean (or a sum over a fixed step size when accumulating).
The implicit reward of a response is β·(log π − log π_ref).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, get_args

import torch
import torch.nn.functional as F
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.names import DPOVariant


def chosen_nll(pi_c: Tensor, chosen_tokens: Tensor) -> Tensor:
    """DPO's NLL term (OpenRLHF's `--nll_loss_coef`): −pi_c / |y_c|, the chosen response's
    mean per-token negative log-likelihood; (B,) summed log-probs, (B,) token counts → (B,)."""
    return -pi_c / chosen_tokens.to(pi_c.dtype).clamp(min=1)


def dpo_logits(pi_c: Tensor, pi_r: Tensor, ref_c: Tensor, ref_r: Tensor) -> Tensor:
    """h = (pi_c − pi_r) − (ref_c − ref_r), the DPO log-ratio margin."""
    return (pi_c - pi_r) - (ref_c - ref_r)


def dpo_sigmoid(pi_c: Tensor, pi_r: Tensor, ref_c: Tensor, ref_r: Tensor, *,
                beta: float = 0.1) -> Tensor:
    """DPO (Rafailov et al. 2023, eq. 7): −log σ(β·h)."""
    return -F.logsigmoid(beta * dpo_logits(pi_c, pi_r, ref_c, ref_r))


def ipo(pi_c: Tensor, pi_r: Tensor, ref_c: Tensor, ref_r: Tensor, *,
        beta: float = 0.1) -> Tensor:
    """IPO (Azar et al. 2023, eq. 17): (h − 1/(2β))²."""
    return (dpo_logits(pi_c, pi_r, ref_c, ref_r) - 1.0 / (2.0 * beta)).pow(2)


def cdpo(pi_c: Tensor, pi_r: Tensor, ref_c: Tensor, ref_r: Tensor, *,
         beta: float = 0.1, label_smoothing: float = 0.1) -> Tensor:
    """Conservative DPO (Mitchell 2023): −(1−ε)·log σ(β·h) − ε·log σ(−β·h), ε = label noise."""
    h = beta * dpo_logits(pi_c, pi_r, ref_c, ref_r)
    return -(1.0 - label_smoothing) * F.logsigmoid(h) - label_smoothing * F.logsigmoid(-h)


DPO_LOSSES: dict[DPOVariant, Callable[..., Tensor]] = {
    "sigmoid": dpo_sigmoid,
    "ipo": ipo,
    "cdpo": cdpo,
}


class PreferenceOutput(NamedTuple):
    """Per-pair loss (B,) and the detached implicit rewards β·(π − π_ref) (B,) each."""

    loss: Tensor
    chosen_reward: Tensor
    rejected_reward: Tensor


def dpo_loss(
    pi_c: Tensor, pi_r: Tensor, ref_c: Tensor, ref_r: Tensor, *,
    variant: DPOVariant = "sigmoid", beta: float = 0.1, label_smoothing: float = 0.0,
) -> PreferenceOutput:
    """The named DPO-family loss per pair, with implicit rewards for logging."""
    if variant not in DPO_LOSSES:
        raise ConfigError(f"dpo variant {variant!r}: expected one of {get_args(DPOVariant)}")
    if beta <= 0:
        raise ConfigError(f"beta={beta}: expected a positive value (e.g. 0.1)")
    if variant != "cdpo" and label_smoothing != 0.0:
        raise ConfigError(f"label_smoothing={label_smoothing} needs variant 'cdpo', got {variant!r}")
    extra = {"label_smoothing": label_smoothing} if variant == "cdpo" else {}
    loss = DPO_LOSSES[variant](pi_c, pi_r, ref_c, ref_r, beta=beta, **extra)
    return PreferenceOutput(loss, beta * (pi_c - ref_c).detach(), beta * (pi_r - ref_r).detach())


class KTOOutput(NamedTuple):
    """Per-example losses (desirable then undesirable), rewards of each, and the KL used."""

    loss: Tensor
    chosen_reward: Tensor
    rejected_reward: Tensor
    kl: Tensor


def kto_loss(
    pi_c: Tensor, ref_c: Tensor, pi_r: Tensor, ref_r: Tensor, pi_kl: Tensor, ref_kl: Tensor,
    *, beta: float = 0.1, desirable_weight: float = 1.0, undesirable_weight: float = 1.0,
) -> KTOOutput:
    """KTO (Ethayarajh et al. 2024) on unpaired examples.

    z = max(0, mean(pi_kl − ref_kl)), detached: the KL reference point, estimated on
    mismatched (prompt, other prompt's response) pairs. Desirable: λ_D·(1 − σ(β(lr_c − z)));
    undesirable: λ_U·(1 − σ(β(z − lr_r))), lr = log π − log π_ref. Either side may be empty.
    """
    z = (pi_kl - ref_kl).mean().detach().clamp(min=0)
    lr_c, lr_r = pi_c - ref_c, pi_r - ref_r
    chosen = desirable_weight * (1.0 - torch.sigmoid(beta * (lr_c - z)))
    rejected = undesirable_weight * (1.0 - torch.sigmoid(beta * (z - lr_r)))
    return KTOOutput(torch.cat([chosen, rejected]), beta * lr_c.detach(), beta * lr_r.detach(), z)


def mismatched_pairs(batch_size: int) -> Tensor:
    """Response index for each prompt's KL sample: prompt i with response (i+1) mod B."""
    return torch.roll(torch.arange(batch_size), -1)
