"""GDPO (Liu et al. 2026, "Group reward-Decoupled normalization Policy Optimization"): with
several reward sources, normalise each source within its prompt group before combining.

GRPO normalises the weighted sum r = Σ_k w_k r_k within each group, so a source on a large
scale (a 0–10 judge) drowns a 0/1 format check. GDPO gives each source an equal say:

    Â_k = (r_k − mean_g r_k) / (std_g r_k + ε)      per source k, per group g (std: n − 1)
    A   = Σ_k w_k Â_k, then divided by its std over the batch (its batch mean is already 0)

`algo.advantage.multi_reward_norm`: `sum` (GRPO, the default) or `per_source` (GDPO);
the peers' spellings `gdpo`, TRL's `normalize_then_sum` / `sum_then_normalize` are aliases.
Each source's raw reward is committed in `rollout_scores.scores[name]`, so its per-group
normalised value Â_k is one SQL window away (the `rollouts` view of the catalog):

    SELECT prompt_id, sample_idx,
           (scores['a'] - avg(scores['a']) OVER g) / (stddev_samp(scores['a']) OVER g + 1e-9)
    FROM rollouts WHERE run_id = ? AND iteration = ?
    WINDOW g AS (PARTITION BY prompt_id)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Literal

from alignflow.errors import ConfigError, require

if TYPE_CHECKING:  # torch loads on first use: the config reads `canonical` without it
    from torch import Tensor

MultiRewardNorm = Literal["sum", "per_source"]
ALIASES: dict[str, MultiRewardNorm] = {
    "sum": "sum", "grpo": "sum", "sum_then_normalize": "sum",
    "per_source": "per_source", "gdpo": "per_source", "normalize_then_sum": "per_source"}


def canonical(value: object) -> MultiRewardNorm:
    """The canonical spelling, or one ConfigError line naming the key and the choices."""
    ok = isinstance(value, str) and value.lower() in ALIASES
    require(ok, "multi_reward_norm", f"one of {sorted(ALIASES)} (sum: GRPO, per_source: GDPO)",
            value)
    return ALIASES[value.lower()]


def source_rewards(maps: Sequence[Sequence[tuple[str, float]] | None]) -> dict[str, Tensor]:
    """Per-source rewards (B,) from the committed `scores` maps: every key without a `/`
    (`name/key` entries are a source's components, not a reward)."""
    import torch

    rows = [dict(m or ()) for m in maps]
    names = sorted({k for row in rows for k in row if "/" not in k})
    missing = [i for i, row in enumerate(rows) if any(row.get(k) is None for k in names)]
    if missing:
        raise ConfigError(f"multi_reward_norm=per_source: rows {missing[:5]} lack a score of "
                          f"one of the sources {names}")
    return {k: torch.tensor([row[k] for row in rows], dtype=torch.float32) for k in names}


def per_source_normalize(rewards: Mapping[str, Tensor], n: int,
                         weights: Mapping[str, float] | None = None, eps: float = 1e-9
                         ) -> tuple[Tensor, dict[str, Tensor]]:
    """(Σ_k w_k Â_k, {k: Â_k}): each source group-normalised as GRPO does the total, then
    weighted (weights default to 1.0, as `CombinedReward`'s)."""
    from alignflow.tasks.advantages.estimators import group_normalize

    if not rewards:
        raise ConfigError("multi_reward_norm=per_source: no per-source rewards were stored")
    weights = weights or {}
    normalised = {k: group_normalize(r, n, eps=eps) for k, r in rewards.items()}
    combined = sum(float(weights.get(k, 1.0)) * a for k, a in normalised.items())
    return combined, normalised


def gdpo_reward(rewards: Mapping[str, Tensor], n: int,
                weights: Mapping[str, float] | None = None, eps: float = 1e-9) -> Tensor:
    """GDPO's sequence-level advantage: the weighted per-source sum, whitened over the batch
    (population std, as `whiten`); the group estimator then only centres it (a no-op)."""
    combined, _ = per_source_normalize(rewards, n, weights, eps)
    centred = combined - combined.mean()
    return centred / (centred.pow(2).mean().sqrt() + eps)
