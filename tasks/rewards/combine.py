"""Several reward sources as one: a weighted sum, each source's reward kept by name.

reward = Σ_i w_i · r_i. `scores[name]` holds source i's own reward r_i, and its components
and logs are kept as `scores[f"{name}/{key}"]` / `extra_logs[f"{name}/{key}"]`, so the
score step can commit every part as a column. Clipping belongs to the advantage code.

What dynamic filtering reads is OpenRLHF's `scores`, not the reward: a reward function or
server may shape its reward (a format penalty, -0.5 for no answer) and give the 0/1
correctness as `scores` (kept as `scores["score"]`); OpenRLHF filters on that, falling back
to the reward when a source gives none. Here: filter score = Σ_i w_i · s_i, s_i = source i's
`score` when it has one, else r_i.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import Tensor

from alignflow.errors import ConfigError
from alignflow.tasks.rewards.base import RewardOutput, RewardSource, check_batch


class CombinedReward:
    """Weighted sum of named sources; weights default to 1.0 each."""

    def __init__(self, sources: Mapping[str, RewardSource],
                 weights: Mapping[str, float] | None = None) -> None:
        if not sources:
            raise ConfigError("no reward sources given; expected at least one")
        weights = dict(weights or {})
        unknown = sorted(set(weights) - set(sources))
        if unknown:
            raise ConfigError(f"reward_weights name unknown sources {unknown}; "
                              f"expected names among {sorted(sources)}")
        self.sources = dict(sources)
        self.weights = {name: float(weights.get(name, 1.0)) for name in sources}

    def score(self, queries: list[str], prompts: list[str],
              labels: list[str | None]) -> RewardOutput:
        check_batch(queries, prompts, labels)
        total = torch.zeros(len(queries), dtype=torch.float32)
        filtered = torch.zeros(len(queries), dtype=torch.float32)
        scores: dict[str, Tensor] = {}
        logs: dict[str, Tensor] = {}
        batch: dict[str, float] = {}
        for name, source in self.sources.items():
            out = source.score(queries, prompts, labels)
            total += self.weights[name] * out.rewards
            filtered += self.weights[name] * out.scores.get("score", out.rewards)
            scores[name] = out.rewards
            scores |= {f"{name}/{k}": v for k, v in out.scores.items()}
            logs |= {f"{name}/{k}": v for k, v in out.extra_logs.items()}
            batch |= {f"{name}/{k}": v for k, v in out.batch_logs.items()}
        return RewardOutput(total, scores, logs, batch, filter_scores=filtered)

    def offload(self) -> None:
        """Free the memory of every source that can (reward models); rules have nothing."""
        for source in self.sources.values():
            if hasattr(source, "offload"):
                source.offload()

    def reload(self) -> None:
        """Undo `offload` (scoring also reloads on demand)."""
        for source in self.sources.values():
            if hasattr(source, "reload"):
                source.reload()


def filter_groups(rewards: Tensor, n: int) -> Tensor:
    """DAPO dynamic sampling: True for each group of `n` consecutive samples (one prompt's
    responses) whose rewards are not all equal — the groups that carry a learning signal.

    (N,) rewards → (N // n,) bool; `mask.repeat_interleave(n)` gives the per-sample mask.
    """
    if n < 1 or rewards.dim() != 1 or rewards.shape[0] % n:
        raise ConfigError(f"filter_groups: {tuple(rewards.shape)} rewards do not split into "
                          f"groups of n={n}; expected a 1-D tensor with a multiple of n items")
    groups = rewards.reshape(-1, n)
    return (groups != groups[:, :1]).any(dim=1)


def groups_in_range(scores: Tensor, n: int, low: float, high: float) -> Tensor:
    """OpenRLHF's dynamic filtering: True for each group of `n` whose mean score lies
    strictly inside (low, high) — with 0/1 scores and (0, 1), the groups neither all right
    nor all wrong. (N,) → (N // n,) bool."""
    if n < 1 or scores.dim() != 1 or scores.shape[0] % n:
        raise ConfigError(f"dynamic filtering: {tuple(scores.shape)} scores do not split into "
                          f"groups of n={n}; expected a 1-D tensor with a multiple of n items")
    mean = scores.float().reshape(-1, n).mean(dim=1)
    return (mean > low) & (mean < high)
