"""On-policy distillation's advantage (`algo.advantage.estimator on_policy_distill`).

The student's own samples, scored per token by the teacher; with k1 the per-token KL the
learn step hands over is log π_S(y_t) − log π_T(y_t), a one-sample estimate of the reverse
KL(π_S ‖ π_T) at that position. Its negative is the token's advantage (the reward of that
token alone: no sum over later tokens, i.e. discount 0, as TRL's and veRL's on-policy
distillation and Thinking Machines' write-up have it), β its weight; a task reward, when
the run has a varying one, is added on every valid token after a baseline (the group mean
with n ≥ 2 samples per prompt, else the batch mean):

    A_{i,t} = β·(log π_T − log π_S)_{i,t} + (r_i − b_i)        (0 on padding)

With a constant reward (e.g. every answer scored alike) the second term is 0: pure
distillation. Not whitened, so the KL term keeps its scale across batches.
"""

from __future__ import annotations

from torch import Tensor

from alignflow.errors import ConfigError


def distill_advantages(reward: Tensor, kl: Tensor | None, action_mask: Tensor, beta: float,
                       n: int) -> Tensor:
    """(B,) rewards, (B, T) per-token KL (log π_S − log π_T) → (B, T) advantages."""
    if kl is None:
        raise ConfigError("algo.advantage.estimator=on_policy_distill: no teacher log-probs "
                          "reached the learn step; expected the on_policy_distill flow (or "
                          "ref.model_name_or_path = the teacher with algo.kl.init_coef > 0)")
    reward = reward.float()
    if n > 1:
        g = reward.reshape(-1, n)
        centred = (g - g.mean(-1, keepdim=True)).reshape(-1)
    else:
        centred = reward - reward.mean()
    mask = action_mask.to(kl.dtype)
    return (-beta * kl + centred[:, None]) * mask
