"""FlashREINFORCE's advantage (OpenRLHF v0.11.2, `--algo.advantage.estimator
flash_reinforce`, #1339): one sample per prompt, so there is no group to compare within;
the baseline is the mean reward of the rollout batch, and the advantages are not whitened.

    A_t = (r_i − mean_batch r) − β·Σ_{t' ≥ t} KL_t'   on every valid token of row i

(the KL term as every sequence-level estimator has it: on the EOS token, returns with γ = 1).
"""

from __future__ import annotations

from torch import Tensor

from alignflow.tasks.advantages.shaping import compute_token_rewards, discounted_returns


def batch_mean_baseline(reward: Tensor) -> Tensor:
    """r_i − mean(r) over the whole rollout batch (B,) → (B,)."""
    reward = reward.float()
    return reward - reward.mean()


def flash_returns(reward: Tensor, action_mask: Tensor, kl: Tensor | None, kl_coef: float,
                  reward_clip: float | tuple[float, float] | None) -> Tensor:
    """FlashREINFORCE's advantages (= returns), (B,) rewards → (B, T): batch-mean baseline,
    sequence-level returns, no whitening."""
    tokens = compute_token_rewards(batch_mean_baseline(reward), kl, action_mask, kl_coef,
                                   reward_clip)
    return discounted_returns(tokens, action_mask, 1.0)
