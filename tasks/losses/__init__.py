"""Loss functions, pure torch (no Ray, vLLM or transformers). One function per variant,
registered by a `Literal` name; formulas are in each docstring.

Names are imported on first use (`alignflow/lazy.py`)."""

from __future__ import annotations

from alignflow.lazy import exports

_EXPORTS = {
    "AGGREGATIONS": "aggregate",
    "Aggregation": "aggregate",
    "aggregate": "aggregate",
    "masked_mean": "aggregate",
    "masked_sum": "aggregate",
    "KL_ESTIMATORS": "kl",
    "KLEstimator": "kl",
    "approx_kl": "kl",
    "k1": "kl",
    "k2": "kl",
    "k3": "kl",
    "POLICY_LOSSES": "policy",
    "PolicyLossKnobs": "policy",
    "PolicyLossName": "names",
    "dual_clip_tokens": "policy",
    "kl_loss": "policy",
    "policy_loss": "policy",
    "policy_metrics": "policy",
    "ppo_clip_tokens": "policy",
    "value_loss": "policy",
    "DPO_LOSSES": "preference",
    "DPOVariant": "preference",
    "KTOOutput": "preference",
    "PreferenceOutput": "preference",
    "cdpo": "preference",
    "chosen_nll": "preference",
    "dpo_loss": "preference",
    "dpo_sigmoid": "preference",
    "ipo": "preference",
    "kto_loss": "preference",
    "mismatched_pairs": "preference",
    "REWARD_LOSSES": "reward_model",
    "PRMOutput": "reward_model",
    "RewardLossName": "reward_model",
    "pairwise_logexp": "reward_model",
    "pairwise_sigmoid": "reward_model",
    "prm_loss": "reward_model",
    "reward_loss": "reward_model",
    "IGNORE_INDEX": "tokens",
    "entropy_from_logits": "tokens",
    "forward_kl": "tokens",
    "kd_loss": "tokens",
    "masked_entropy": "tokens",
    "ptx_loss": "tokens",
    "sft_loss": "tokens",
    "token_logprobs": "tokens",
    "with_ptx": "tokens",
}
__all__ = sorted(_EXPORTS)

__getattr__ = exports(__name__, _EXPORTS)
