"""Advantage estimators and reward shaping, pure torch (no Ray, vLLM or transformers)."""

from alignflow.tasks.advantages.estimators import (
    ESTIMATORS,
    GROUP_ESTIMATORS,
    AdvantageConfig,
    Advantages,
    Estimator,
    RolloutBatch,
    compute_advantages,
    dr_grpo,
    gae,
    gae_estimator,
    group_mean_baseline,
    group_norm,
    group_normalize,
    leave_one_out,
    reinforce,
    reinforce_baseline,
    rloo,
)
from alignflow.tasks.advantages.normalize import RunningMoments, whiten
from alignflow.tasks.advantages.shaping import (
    LengthPenalty,
    compute_token_rewards,
    discounted_returns,
    last_valid_index,
    overlong_penalty,
)

__all__ = [
    "ESTIMATORS", "GROUP_ESTIMATORS", "AdvantageConfig", "Advantages",
    "Estimator", "LengthPenalty", "RolloutBatch", "RunningMoments",
    "compute_advantages", "compute_token_rewards", "discounted_returns", "dr_grpo", "gae",
    "gae_estimator", "group_mean_baseline", "group_norm", "group_normalize",
    "last_valid_index", "leave_one_out", "overlong_penalty", "reinforce", "reinforce_baseline",
    "rloo", "whiten",
]
