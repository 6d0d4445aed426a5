"""Loss functions, pure torch (no Ray, vLLM or transformers). One function per variant,
registered by a `Literal` name; formulas are in each docstring."""

from alignflow.tasks.losses.aggregate import (
    AGGREGATIONS,
    Aggregation,
    aggregate,
    masked_mean,
    masked_sum,
)
from alignflow.tasks.losses.kl import KL_ESTIMATORS, KLEstimator, approx_kl, k1, k2, k3
from alignflow.tasks.losses.policy import (
    POLICY_LOSSES,
    PolicyLossName,
    dual_clip_tokens,
    kl_loss,
    policy_loss,
    policy_metrics,
    ppo_clip_tokens,
    value_loss,
)
from alignflow.tasks.losses.preference import (
    DPO_LOSSES,
    DPOVariant,
    KTOOutput,
    PreferenceOutput,
    cdpo,
    chosen_nll,
    dpo_loss,
    dpo_sigmoid,
    ipo,
    kto_loss,
    mismatched_pairs,
)
from alignflow.tasks.losses.reward_model import (
    REWARD_LOSSES,
    PRMOutput,
    RewardLossName,
    pairwise_logexp,
    pairwise_sigmoid,
    prm_loss,
    reward_loss,
)
from alignflow.tasks.losses.tokens import (
    IGNORE_INDEX,
    entropy_from_logits,
    forward_kl,
    kd_loss,
    masked_entropy,
    ptx_loss,
    sft_loss,
    token_logprobs,
    with_ptx,
)

__all__ = [
    "AGGREGATIONS", "DPO_LOSSES", "IGNORE_INDEX", "KL_ESTIMATORS", "POLICY_LOSSES",
    "REWARD_LOSSES", "Aggregation", "DPOVariant", "KLEstimator", "KTOOutput", "PRMOutput",
    "PolicyLossName", "PreferenceOutput", "RewardLossName", "aggregate", "approx_kl", "cdpo",
    "chosen_nll",
    "dpo_loss", "dpo_sigmoid", "dual_clip_tokens", "entropy_from_logits", "forward_kl", "ipo",
    "k1", "k2", "k3", "kd_loss", "kl_loss", "kto_loss", "masked_entropy", "masked_mean",
    "masked_sum", "mismatched_pairs", "pairwise_logexp", "pairwise_sigmoid", "policy_loss",
    "policy_metrics", "ppo_clip_tokens", "prm_loss", "ptx_loss", "reward_loss", "sft_loss",
    "token_logprobs", "value_loss", "with_ptx",
]
