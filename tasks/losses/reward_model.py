"""Reward-model losses: pairwise Bradley-Terry on scalar rewards, and the process RM CE.

Pairwise losses take (B,) rewards of the chosen and rejected responses and return the
per-pair loss (B,).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import NamedTuple, get_args

import torch
import torch.nn.functional as F
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.losses.aggregate import upcast
from alignflow.tasks.losses.names import RewardLossName


def pairwise_sigmoid(r_c: Tensor, r_r: Tensor, margin: Tensor | float | None = None) -> Tensor:
    """Bradley-Terry (InstructGPT; Llama 2 margin): −log σ(r_c − r_r − m), m = 0 by default."""
    m = 0.0 if margin is None else margin
    return -F.logsigmoid(r_c - r_r - m)


def pairwise_logexp(r_c: Tensor, r_r: Tensor, margin: Tensor | float | None = None) -> Tensor:
    """Anthropic HH (Bai et al. 2022): log(1 + exp(r_r − r_c + m)), computed as a softplus.

    Equal to `pairwise_sigmoid` in exact arithmetic; kept as its own name for configs.
    """
    m = 0.0 if margin is None else margin
    return F.softplus(r_r - r_c + m)


REWARD_LOSSES: dict[RewardLossName, Callable[..., Tensor]] = {
    "sigmoid": pairwise_sigmoid,
    "logexp": pairwise_logexp,
}


def reward_loss(
    r_c: Tensor, r_r: Tensor, *, name: RewardLossName = "sigmoid",
    margin: Tensor | float | None = None,
) -> Tensor:
    """The named pairwise loss per pair (B,)."""
    if name not in REWARD_LOSSES:
        raise ConfigError(f"reward loss {name!r}: expected one of {get_args(RewardLossName)}")
    return REWARD_LOSSES[name](r_c, r_r, margin)


class PRMOutput(NamedTuple):
    """Mean CE over placeholder positions, and the argmax accuracy there."""

    loss: Tensor
    accuracy: Tensor


def prm_loss(
    input_ids: Tensor, logits: Tensor, labels: Tensor, *, placeholder_id: int,
    reward_token_ids: list[int] | None = None,
) -> PRMOutput:
    """Process RM (Math-Shepherd style): CE at each step placeholder over the label tokens.

    Positions where input_ids == placeholder_id are scored. Hard labels are token ids
    (of reward_token_ids when given, e.g. [id('+'), id('-')], else of the whole vocab).
    Float labels are soft: P(first reward token), the second gets 1 − p.
    """
    at = input_ids == placeholder_id
    z, y = upcast(logits[at]), labels[at]
    if reward_token_ids is not None:
        z = z[:, reward_token_ids]
    if y.is_floating_point():
        if reward_token_ids is None or len(reward_token_ids) != 2:
            raise ConfigError("prm soft labels: expected reward_token_ids with exactly 2 ids")
        target = torch.stack([y, 1.0 - y], dim=-1).to(z.dtype)
        return PRMOutput(F.cross_entropy(z, target), (z.argmax(-1) == (y < 0.5).long()).float().mean())
    if reward_token_ids is not None:
        hits = y.unsqueeze(-1) == torch.tensor(reward_token_ids, device=y.device)
        if not bool(hits.any(-1).all()):
            raise ConfigError(f"prm labels at placeholders: expected ids in {reward_token_ids}")
        y = hits.long().argmax(-1)
    return PRMOutput(F.cross_entropy(z, y), (z.argmax(-1) == y).float().mean())
