"""Turn one scalar reward per sequence into per-token rewards, and the discounted sums of them.

Tensors are right- or left-padded (B, T) over response tokens with an action mask; the
last valid token of a row is its EOS, where the sequence reward lands.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from alignflow.errors import ConfigError

LengthPenalty = Callable[[Tensor], Tensor]


def last_valid_index(mask: Tensor) -> Tensor:
    """(B,) index of each row's last True in `mask` (0 for an empty row)."""
    positions = torch.arange(mask.shape[-1], device=mask.device).expand_as(mask)
    return torch.where(mask.bool(), positions, 0).amax(dim=-1)


def compute_token_rewards(
    reward: Tensor, kl: Tensor | None, action_mask: Tensor, kl_coef: float = 0.0,
    reward_clip: float | tuple[float, float] | None = 10.0,
    length_penalty: LengthPenalty | None = None,
) -> Tensor:
    """r_t = [t = EOS] · clip(r + penalty(len), lo, hi) − β·kl_t·m_t, (B,) + (B, T) → (B, T).

    `reward_clip` is (lo, hi), or c for (−c, c) (OpenRLHF: `--reward_clip_range -10 10`).
    `length_penalty` maps response lengths (B,) to an additive reward term (B,); it runs
    before clipping. kl_coef ≤ 0 or kl=None drops the KL term (KL used as a loss instead).
    """
    mask = action_mask.bool()
    r = reward.float()
    if length_penalty is not None:
        r = r + length_penalty(mask.sum(-1))
    if reward_clip is not None:
        low, high = (-reward_clip, reward_clip) if isinstance(reward_clip, int | float) \
            else reward_clip
        r = r.clamp(low, high)
    out = torch.zeros(mask.shape, dtype=torch.float32, device=reward.device)
    out.scatter_(1, last_valid_index(mask).unsqueeze(1), r.unsqueeze(1))
    if kl is not None and kl_coef > 0:
        out = out - kl_coef * kl.float()
    return out * mask


def overlong_penalty(max_len: int, buffer_len: int, factor: float = 1.0) -> LengthPenalty:
    """DAPO soft overlong punishment: −factor·min(len − (L−buf), buf)/buf when past L − buf."""
    if not 0 < buffer_len <= max_len:
        raise ConfigError(f"overlong buffer_len={buffer_len}: expected 0 < buffer_len <= max_len={max_len}")

    def penalty(lengths: Tensor) -> Tensor:
        excess = (lengths.float() - (max_len - buffer_len)).clamp(0, buffer_len)
        return -factor * excess / buffer_len

    return penalty


def stop_properly(reward: Tensor, truncated: Tensor, coef: float) -> Tensor:
    """ProRL's stop-properly penalty (OpenRLHF's `reward.stop_properly_penalty_coef`) on the
    responses cut at the length limit: r' = coef·r for coef in [0, 1], r' = coef for
    coef < 0 (a fixed reward); the others keep r. (B,) rewards, (B,) bool → (B,)."""
    if coef >= 0:
        return torch.where(truncated, reward * coef, reward)
    return torch.where(truncated, torch.full_like(reward, coef), reward)


def discounted_returns(token_rewards: Tensor, action_mask: Tensor, gamma: float = 1.0) -> Tensor:
    """G_t = Σ_{k≥t} γ^{k−t} r_k m_k, computed right to left; masked positions hold 0.

    γ = 1 (every sequence-level estimator) is one reversed cumulative sum instead of a loop.
    """
    mask = action_mask.to(token_rewards.dtype)
    rewards = token_rewards * mask
    if gamma == 1.0:
        return rewards.flip(-1).cumsum(-1).flip(-1) * mask
    returns = torch.zeros_like(rewards)
    running = torch.zeros_like(rewards[:, 0])
    for t in reversed(range(rewards.shape[1])):
        running = rewards[:, t] + gamma * running
        returns[:, t] = running
    return returns * mask
