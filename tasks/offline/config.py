"""The step configs of the offline training flows (OpenRLHF 0.11's names where they exist):
the dataset and eval sections, what the prepare task reads, and what a `train` task needs
besides the data.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from alignflow.errors import require
from alignflow.tasks.data.source import DataSource

POLICY, TEACHER = "policy", "teacher"  # the offline flows' hosts
TRAINED = "model"  # the role the policy host trains


@dataclass(frozen=True, kw_only=True)
class OfflineDataConfig(DataSource):
    """Where examples come from and how they become token ids (`data.*`).

    dataset: dataset spec(s), comma-separated (HF name, local file/folder, alignflow:NAME)
    dataset_probs: mixing probabilities, comma-separated
    dataset_split: the split to read (default: the dataset's only or first split)
    output_key: the column holding the response (SFT; null: input_key holds whole chats)
    prompt_key: the column holding the prompt of a preference pair
    chosen_key: the column holding the preferred response
    rejected_key: the column holding the other response
    score_key: CSFT: the column holding each row's score
    score_template: CSFT: the line appended to the prompt; {score} is the row's score
    max_len: tokens per example; longer ones are truncated
    placeholder_token: PRM: the token that marks the end of each step
    reward_tokens: PRM: the label tokens, e.g. +,-
    seed: seed of the dataset mix and of the eval hold-out
    """

    dataset: str = "alignflow:champ-pairs"
    dataset_probs: str | None = None
    dataset_split: str | None = "train"
    output_key: str | None = None
    prompt_key: str | None = None
    chosen_key: str = "chosen"
    rejected_key: str = "rejected"
    score_key: str = "score"
    score_template: str = "<rm_score>: {score}"
    max_len: int = 2048
    max_samples: int | None = 1_000_000
    placeholder_token: str | None = None
    reward_tokens: tuple[str, ...] | None = None
    seed: int = 42

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.max_len >= 2, "max_len", "an integer >= 2", self.max_len)
        if self.reward_tokens is not None:
            object.__setattr__(self, "reward_tokens", tuple(self.reward_tokens))


@dataclass(frozen=True, kw_only=True)
class EvalConfig:
    """Evaluation (`eval.*`).

    dataset: eval dataset spec(s); null: hold out `ratio` of the training data
    split: the eval dataset's split
    ratio: share of the training data held out for eval when no eval dataset is given
    steps: evaluate every N optimizer steps (-1: at the end only)
    """

    dataset: str | None = None
    split: str | None = None
    ratio: float = 0.0
    steps: int = -1

    def __post_init__(self) -> None:
        require(math.isfinite(self.ratio) and 0.0 <= self.ratio < 1.0, "ratio",
                "a float in [0, 1)", self.ratio)
        require(self.steps == -1 or self.steps >= 1, "steps", "an integer >= 1, or -1",
                self.steps)


@dataclass(frozen=True, kw_only=True)
class PrepareSpec:
    """What the prepare task reads: the data keys, the eval split, and whether SFT puts a
    label on every token (pretrain mode)."""

    data: OfflineDataConfig
    eval: EvalConfig = field(default_factory=EvalConfig)
    pretrain_mode: bool = False


@dataclass(frozen=True, kw_only=True)
class TrainSpec:
    """What a `train` task needs besides the data: objective, batching, cadence."""

    kind: str
    loss: Any = None  # the objective's loss knobs (its model section: DPOModelConfig, ...)
    train_batch_size: int
    micro_train_batch_size: int
    save_steps: int
    eval_steps: int
    placeholder_token: str | None = "ки"
    reward_tokens: tuple[str, ...] | None = None
    packing: bool = False
    loss_normalizer: str = "step"  # train.loss_normalizer: step, or micro_batch (<= v0.10.2)
