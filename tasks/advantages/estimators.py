"""Advantage estimators, registered by name, as OpenRLHF computes them.

Sequence-level estimators first shape the scalar rewards within each group of n
consecutive rows (samples of one prompt), then put them on the EOS token (clip, minus
β·KL per token) and take returns with γ = 1, so with β = 0 every valid token of a row
carries the row's shaped reward. `gae`, `reinforce` and `reinforce_baseline` are then
whitened over all valid tokens of the batch; `group_norm`, `dr_grpo` and `rloo` are not.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple, get_args

import torch
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.advantages.distill import distill_advantages
from alignflow.tasks.advantages.flash import flash_returns
from alignflow.tasks.advantages.names import Estimator
from alignflow.tasks.advantages.normalize import whiten
from alignflow.tasks.advantages.shaping import (
    LengthPenalty,
    compute_token_rewards,
    discounted_returns,
)

GROUP_ESTIMATORS = ("reinforce_baseline", "group_norm", "dr_grpo", "rloo")


@dataclass(frozen=True, kw_only=True)
class AdvantageConfig:
    """How to turn rewards into advantages; validated once here."""

    estimator: Estimator = "group_norm"
    n: int = 1
    gamma: float = 1.0
    lambd: float = 0.95
    kl_coef: float = 0.0
    reward_clip: float | tuple[float, float] | None = 10.0  # c: (−c, c)
    no_std: bool = False
    whiten_std: bool = True
    eps: float = 1e-9
    length_penalty: LengthPenalty | None = None

    def __post_init__(self) -> None:
        if self.estimator not in get_args(Estimator):
            raise ConfigError(f"estimator {self.estimator!r}: expected one of {get_args(Estimator)}")
        if self.n < 1 or (self.estimator in ("rloo", "group_norm") and self.n < 2):
            raise ConfigError(f"n={self.n} samples per prompt: {self.estimator} needs n >= 2")
        if self.estimator in GROUP_ESTIMATORS and self.gamma != 1.0:
            raise ConfigError(f"gamma={self.gamma}: {self.estimator} is sequence-level, set gamma=1.0")
        if not (0.0 <= self.gamma <= 1.0 and 0.0 <= self.lambd <= 1.0):
            raise ConfigError(f"gamma={self.gamma}, lambd={self.lambd}: expected both in [0, 1]")


@dataclass(frozen=True)
class RolloutBatch:
    """Inputs: reward (B,), action mask (B, T); kl (B, T) and values (B, T) when used."""

    reward: Tensor
    action_mask: Tensor
    kl: Tensor | None = None
    values: Tensor | None = None


class Advantages(NamedTuple):
    """Per-token advantages and returns (B, T); masked positions are 0."""

    advantages: Tensor
    returns: Tensor


def group_view(reward: Tensor, n: int) -> Tensor:
    """(B,) → (B/n, n): rows of one prompt's samples, which must be consecutive."""
    if reward.shape[0] % n:
        raise ConfigError(f"batch of {reward.shape[0]} rewards is not a multiple of n={n}")
    return reward.float().reshape(-1, n)


def group_mean_baseline(reward: Tensor, n: int) -> Tensor:
    """r_i − mean_g(r): REINFORCE++-baseline and Dr.GRPO."""
    g = group_view(reward, n)
    return (g - g.mean(-1, keepdim=True)).reshape(-1)


def group_normalize(reward: Tensor, n: int, *, no_std: bool = False, eps: float = 1e-9) -> Tensor:
    """GRPO: (r_i − mean_g r)/(std_g r + ε), std unbiased (n − 1); no_std keeps only r − mean."""
    g = group_view(reward, n)
    centred = g - g.mean(-1, keepdim=True)
    return (centred if no_std else centred / (g.std(-1, keepdim=True) + eps)).reshape(-1)


def leave_one_out(reward: Tensor, n: int) -> Tensor:
    """RLOO: r_i − (Σ_g r − r_i)/(n − 1)."""
    g = group_view(reward, n)
    return (g - (g.sum(-1, keepdim=True) - g) / (n - 1)).reshape(-1)


def gae(
    token_rewards: Tensor, values: Tensor, action_mask: Tensor, gamma: float = 1.0,
    lambd: float = 0.95,
) -> Advantages:
    """δ_t = r_t + γV_{t+1} − V_t, A_t = δ_t + γλA_{t+1}; returns R_t = A_t + V_t.

    Values and rewards are zeroed at masked positions first, so V past EOS counts as 0.
    """
    mask = action_mask.to(token_rewards.dtype)
    v, r = values.float() * mask, token_rewards * mask
    adv = torch.zeros_like(r)
    last = torch.zeros_like(r[:, 0])
    for t in reversed(range(r.shape[1])):
        next_v = v[:, t + 1] if t + 1 < r.shape[1] else torch.zeros_like(last)
        last = r[:, t] + gamma * next_v - v[:, t] + gamma * lambd * last
        adv[:, t] = last
    return Advantages(adv * mask, (adv + v) * mask)


def _sequence_level(shaped: Tensor, batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """Shaped (B,) rewards → EOS token rewards (−β·KL) → γ=1 returns; advantages = returns."""
    tokens = compute_token_rewards(shaped, batch.kl, batch.action_mask, cfg.kl_coef,
                                   cfg.reward_clip)
    returns = discounted_returns(tokens, batch.action_mask, 1.0)
    return Advantages(returns, returns)


def _penalised(batch: RolloutBatch, cfg: AdvantageConfig) -> Tensor:
    """Reward plus the optional length penalty, applied before any group baseline."""
    if cfg.length_penalty is None:
        return batch.reward.float()
    return batch.reward.float() + cfg.length_penalty(batch.action_mask.bool().sum(-1))


def gae_estimator(batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """PPO: GAE(γ, λ) on token rewards with a critic's values, then global whitening."""
    if batch.values is None:
        raise ConfigError("estimator 'gae' needs critic values: RolloutBatch.values is None")
    tokens = compute_token_rewards(_penalised(batch, cfg), batch.kl, batch.action_mask,
                                   cfg.kl_coef, cfg.reward_clip)
    out = gae(tokens, batch.values, batch.action_mask, cfg.gamma, cfg.lambd)
    return Advantages(whiten(out.advantages, batch.action_mask, use_std=cfg.whiten_std),
                      out.returns)


def reinforce(batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """REINFORCE++: A_t = G_t (γ-discounted token rewards), whitened over the batch."""
    tokens = compute_token_rewards(_penalised(batch, cfg), batch.kl, batch.action_mask,
                                   cfg.kl_coef, cfg.reward_clip)
    returns = discounted_returns(tokens, batch.action_mask, cfg.gamma)
    return Advantages(whiten(returns, batch.action_mask, use_std=cfg.whiten_std), returns)


def reinforce_baseline(batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """REINFORCE++-baseline: r − mean_g r, sequence-level returns, then batch whitening."""
    out = _sequence_level(group_mean_baseline(_penalised(batch, cfg), cfg.n), batch, cfg)
    return Advantages(whiten(out.advantages, batch.action_mask, use_std=cfg.whiten_std),
                      out.returns)


def group_norm(batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """GRPO: (r − mean_g r)/(std_g r + ε) on every valid token (no_std: Dr.GRPO's centring)."""
    shaped = group_normalize(_penalised(batch, cfg), cfg.n, no_std=cfg.no_std, eps=cfg.eps)
    return _sequence_level(shaped, batch, cfg)


def dr_grpo(batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """Dr.GRPO: r − mean_g r on every valid token, no std division."""
    return _sequence_level(group_mean_baseline(_penalised(batch, cfg), cfg.n), batch, cfg)


def rloo(batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """RLOO: r_i − (Σ_g r − r_i)/(n − 1) on every valid token."""
    return _sequence_level(leave_one_out(_penalised(batch, cfg), cfg.n), batch, cfg)


def flash_reinforce(batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """FlashREINFORCE (`flash.py`): r − mean_batch r on every valid token, not whitened."""
    out = flash_returns(_penalised(batch, cfg), batch.action_mask, batch.kl, cfg.kl_coef,
                        cfg.reward_clip)
    return Advantages(out, out)


def on_policy_distill(batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """β·(log π_T − log π_S) per token plus the baselined reward (`distill.py`)."""
    out = distill_advantages(_penalised(batch, cfg), batch.kl, batch.action_mask,
                             cfg.kl_coef, cfg.n)
    return Advantages(out, out)


ESTIMATORS: dict[Estimator, Callable[[RolloutBatch, AdvantageConfig], Advantages]] = {
    "gae": gae_estimator,
    "reinforce": reinforce,
    "reinforce_baseline": reinforce_baseline,
    "group_norm": group_norm,
    "dr_grpo": dr_grpo,
    "rloo": rloo,
    "flash_reinforce": flash_reinforce,
    "on_policy_distill": on_policy_distill,
}


def compute_advantages(batch: RolloutBatch, cfg: AdvantageConfig) -> Advantages:
    """Advantages and returns with the estimator named in `cfg`."""
    return ESTIMATORS[cfg.estimator](batch, cfg)
