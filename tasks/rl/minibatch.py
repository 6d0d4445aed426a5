"""One optimizer step of an RL learn step: which samples each micro-batch holds, what its
losses are divided by, and how much each micro-batch weighs.

Micro-batches hold `train.micro_batch_size` samples, or — with `train.dynamic_batch_enable`
(OpenRLHF's `--use_dynamic_batch`) — as many as fit a token budget (`train.max_tokens_per_gpu`
prompt + response tokens; a longer sample goes alone): first fit, as OpenRLHF counts them.
How the step's loss is normalised (`train.loss_normalizer`):
- `step` (OpenRLHF ≥ v0.10.3): every micro-batch divides by the whole step's kept tokens
  (or sequences), on every rank, and the micro-batches add up with weight 1. The step's
  loss is then one mean over the step however it is cut, so token-budget micro-batches give
  the loss and gradient of fixed ones (up to the order of float additions);
- `micro_batch` (OpenRLHF ≤ v0.10.2): each micro-batch divides by its own count and
  weighs n_b / N, its share of the step's kept samples (DeepSpeed's 1/accumulation steps
  for equal micro-batches, OpenRLHF's `dynamic_loss_scale` for token-budget ones).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from alignflow.artifacts.scope import beat
from alignflow.tasks.distributed import reduce, sharding
from alignflow.tasks.losses.aggregate import Normaliser
from alignflow.tasks.modeling.batching import first_fit
from alignflow.tasks.trainers.optim import LossNormalizer
from alignflow.tasks.trainers.plan import Plan


def split(idx: list[int], lengths: list[int], micro_batch_size: int,
          max_tokens: int | None) -> list[list[int]]:
    """This rank's share of a step as micro-batches: fixed counts, or a token budget."""
    if max_tokens is None:
        return [idx[i:i + micro_batch_size] for i in range(0, len(idx), micro_batch_size)]
    return first_fit(idx, lengths, max_tokens)


@dataclass(frozen=True)
class Counts:
    """Per-sample counts the normalisers read: kept (0/1, after dynamic filtering), kept
    action tokens, prompt + response tokens (the token budget's measure)."""

    kept: torch.Tensor    # (B,) float
    tokens: torch.Tensor  # (B,) float: action tokens of kept samples
    lengths: list[int]
    mode: LossNormalizer = "step"
    max_len: int | None = None  # Dr.GRPO's constant

    @classmethod
    def of(cls, mask: torch.Tensor, kept: torch.Tensor, lengths: list[int],
           mode: LossNormalizer = "step", max_len: int | None = None) -> Counts:
        keptf = kept.to(torch.float64).cpu()
        return cls(keptf, mask.to(torch.float64).cpu().sum(-1) * keptf, lengths, mode,
                   max_len)

    def norm(self, step: list[int], batch: list[int]) -> Normaliser:
        """The normaliser of a micro-batch `batch` of step `step`."""
        rows = batch if self.mode == "micro_batch" else step
        return Normaliser(max(float(self.tokens[rows].sum()), 1.0),
                          max(int((self.tokens[rows] > 0).sum()), 1), self.max_len)

    def weights(self, step: list[int], batches: list[list[int]]) -> list[float]:
        """The trainer's weight of each micro-batch's loss."""
        if self.mode == "step":
            return [1.0] * len(batches)
        total = max(float(self.kept[step].sum()), 1.0)
        return [float(self.kept[b].sum()) / total for b in batches]


def plan(seed: int, n: int, settings) -> Plan:
    """`max_epochs` passes over the batch in seeded minibatches (the last one may be short)."""
    return Plan.for_epochs(seed, n, settings.train.batch_size, settings.train.max_epochs)


def train_steps(trainer, steps: Plan, settings, counts: Counts, make_loss,
                step_extra: Callable[[int], dict] | None = None,
                after_step: Callable[[], None] | None = None) -> dict[str, float]:
    """Every step of `steps`: one optimizer step per minibatch (this rank's share of it);
    returns the mean stats over all ranks. `step_extra(global_step)` adds keys (the ptx
    texts) to the step's heaviest micro-batch, with `ptx_scale` undoing its weight;
    `after_step()` follows each optimizer step (the policy's EMA)."""
    sums: dict[str, float] = {}
    rank, world = reduce.rank_and_size()
    for step in range(steps.total_steps):
        mb = steps.indices(step, settings.train.batch_size)
        groups = split(sharding.shard(mb, rank, world), counts.lengths,
                       settings.train.micro_batch_size, settings.max_tokens)
        weights = counts.weights(mb, groups)
        batches = [{"idx": g} for g in groups]
        if step_extra is not None:
            j = max(range(len(weights)), key=lambda k: weights[k])
            batches[j] |= step_extra(trainer.global_step) | {
                "ptx_scale": 1.0 / weights[j] if weights[j] > 0 else 0.0}
        stats = reduce.global_shares(trainer.step(batches, make_loss(mb), weights=weights))
        if after_step is not None:
            after_step()
        beat(step + 1, steps.total_steps, "optimizer steps")
        for k, v in stats.items():
            sums[k] = sums.get(k, 0.0) + float(v)
    total = max(steps.total_steps, 1)
    return {k: v / total for k, v in sums.items()} | {"optimizer_steps": float(steps.total_steps)}
