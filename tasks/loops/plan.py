"""How a round's kept samples become optimizer steps, and what the training chunks share.

A round trains `max_epochs` passes over its samples in minibatches drawn from one seeded
order (the selection task's seed), one optimizer step per minibatch. The steps are split
into chunks of `save_steps`, one task each, so a killed run resumes at the chunk boundary
with the exact weights, optimizer, scheduler and RNG state of an uninterrupted run.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import pyarrow as pa
import torch

from alignflow.artifacts.errors import ConfigError
from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.schemas import METRICS
from alignflow.tasks.loops.records import Selection
from alignflow.tasks.rl.batching import chunks
from alignflow.tasks.rl.records import StepOutput
from alignflow.tasks.trainers.base import TrainerConfig


@dataclass(frozen=True, kw_only=True)
class LoopTrainConfig:
    """The fine-tuning inside each round. One AdamW + LR schedule spans all rounds."""

    learning_rate: float = 1e-6
    train_batch_size: int = 8
    micro_train_batch_size: int = 4
    max_epochs: int = 1
    save_steps: int = field(default=-1, metadata={
        "help": "optimizer steps per training task (a resume point); -1: one task per round"})
    lr_warmup_ratio: float = 0.0
    min_lr_ratio: float = 1.0
    max_norm: float = 1.0
    l2: float = 0.0
    adam_betas: tuple[float, float] = (0.9, 0.95)

    def __post_init__(self) -> None:
        if self.train_batch_size % self.micro_train_batch_size:
            raise ConfigError(f"train.train_batch_size={self.train_batch_size}: expected a "
                              f"multiple of micro_train_batch_size={self.micro_train_batch_size}")
        if self.max_epochs < 1:
            raise ConfigError(f"train.max_epochs={self.max_epochs}: expected >= 1")
        if self.save_steps == 0:
            raise ConfigError("train.save_steps=0: expected >= 1, or -1 for one task per round")
        object.__setattr__(self, "adam_betas", tuple(self.adam_betas))

    def steps(self, samples: int) -> int:
        """Optimizer steps of a round that kept `samples` samples (or pairs)."""
        return self.max_epochs * math.ceil(samples / self.train_batch_size)

    def chunks(self, samples: int) -> int:
        """Training tasks of such a round."""
        steps = self.steps(samples)
        return steps if steps == 0 else 1 if self.save_steps < 0 else math.ceil(steps / self.save_steps)

    def trainer(self, total_steps: int, *, dtype: str = "fp32",
                gradient_checkpointing: bool = False) -> TrainerConfig:
        return TrainerConfig(lr=self.learning_rate, betas=self.adam_betas, weight_decay=self.l2,
                             lr_warmup_ratio=self.lr_warmup_ratio, min_lr_ratio=self.min_lr_ratio,
                             total_steps=max(total_steps, 1),
                             train_batch_size=self.train_batch_size,
                             micro_train_batch_size=self.micro_train_batch_size,
                             max_norm=self.max_norm, dtype=dtype,
                             gradient_checkpointing=gradient_checkpointing)


def chunk_minibatches(n: int, cfg: LoopTrainConfig, seed: int, chunk: int) -> list[list[int]]:
    """The minibatches (sample indices) of training chunk `chunk` of a round of `n` samples."""
    gen = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(cfg.max_epochs):
        order = torch.randperm(n, generator=gen).tolist()
        batches += [order[i : i + cfg.train_batch_size] for i in range(0, n, cfg.train_batch_size)]
    if cfg.save_steps < 0:
        return batches
    return batches[chunk * cfg.save_steps : (chunk + 1) * cfg.save_steps]


def micro_batches(mb: list[int], micro: int) -> list[dict[str, list[int]]]:
    return [{"idx": [mb[i] for i in r]} for r in chunks(len(mb), micro)]


def selected_rows(store, rollouts: StepOutput, selection: Selection, role: str) -> pa.Table:
    """The rollout rows (ids and text) of the selection rows with `role`, in selection order."""
    sel = read_table(store, selection.refs, columns=["prompt_id", "sample_idx", "role", "pair_id"])
    roll = read_table(store, rollouts.refs, columns=["prompt_id", "sample_idx", "prompt",
                                                     "response", "prompt_ids", "response_ids"])
    where = {k: i for i, k in enumerate(zip(roll.column("prompt_id").to_pylist(),
                                            roll.column("sample_idx").to_pylist(), strict=True))}
    keep = [(p, s, pair) for p, s, r, pair in zip(
        *(sel.column(c).to_pylist() for c in ("prompt_id", "sample_idx", "role", "pair_id")),
        strict=True) if r == role]
    rows = roll.take(pa.array([where[(p, s)] for p, s, _ in keep], pa.int64()))
    return rows.append_column("pair_id", pa.array([pair for *_, pair in keep], pa.string()))


def write_step_metrics(scope, round_: int, history: list[dict[str, float]]) -> None:
    """One `metrics` row per optimizer step and key (step = the trainer's global step)."""
    now = time.time()
    rows = [(int(h["step"]), k, float(v)) for h in history for k, v in sorted(h.items())
            if k != "step"]
    rows += [(int(h["step"]), "round", float(round_)) for h in history]
    if not rows:
        return
    steps, keys, values = zip(*rows, strict=True)
    scope.write(METRICS, pa.table({
        "run_id": [scope.run_id] * len(rows), "task_key": [scope.task_key] * len(rows),
        "step": list(steps), "key": list(keys), "value": list(values),
        "ts": [now] * len(rows)}), partition={"iter": round_})


def mean_metrics(history: list[dict[str, float]]) -> dict[str, float]:
    keys = {k for h in history for k in h}
    out = {k: sum(h.get(k, 0.0) for h in history) / len(history) for k in keys} if history else {}
    return out | {"optimizer_steps": float(len(history))}
