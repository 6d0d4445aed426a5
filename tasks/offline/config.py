"""The step configs of the offline training flows (OpenRLHF's names where they exist):
the dataset section and what a `train` task needs besides the data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from alignflow.errors import ConfigError
from alignflow.tasks.data.source import DataSource


@dataclass(frozen=True, kw_only=True)
class OfflineDataConfig(DataSource):
    """Where examples come from and how they become token ids."""

    dataset: str = field(default="alignflow:champ-pairs", metadata={
        "help": "dataset spec(s), comma-separated (HF name, local file/folder, alignflow:NAME)"})
    dataset_probs: str | None = field(default=None, metadata={"help": "mixing probabilities"})
    split: str | None = None
    eval_dataset: str | None = field(default=None, metadata={
        "help": "eval spec; default: hold out eval_ratio of the data"})
    eval_split: str | None = None
    eval_ratio: float = field(default=0.0, metadata={"help": "share held out for eval"})
    output_key: str | None = "output"
    prompt_key: str | None = "prompt"
    chosen_key: str = "chosen"
    rejected_key: str = "rejected"
    score_key: str = field(default="score", metadata={"help": "CSFT: attribute score column"})
    score_template: str = field(default="<rm_score>: {score}", metadata={
        "help": "CSFT: line appended to the prompt; {score} is the row's score"})
    pretrain_mode: bool = field(default=False, metadata={"help": "SFT: loss on every token"})
    max_len: int = field(default=512, metadata={"help": "tokens per sample; longer is truncated"})
    placeholder_token: str = field(default="ки", metadata={"help": "PRM step placeholder"})
    reward_tokens: tuple[str, ...] | None = field(default=None, metadata={
        "help": "PRM label tokens, e.g. +,-"})
    seed: int = field(default=42, metadata={"help": "seed of the mix and the eval hold-out"})

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 <= self.eval_ratio < 1.0:
            raise ConfigError(f"data.eval_ratio={self.eval_ratio}: expected a float in [0, 1)")
        if self.max_len < 2:
            raise ConfigError(f"data.max_len={self.max_len}: expected >= 2")
        if self.reward_tokens is not None:
            object.__setattr__(self, "reward_tokens", tuple(self.reward_tokens))


@dataclass(frozen=True, kw_only=True)
class TrainSpec:
    """What a `train` task needs besides the data: objective, batching, cadence."""

    kind: str
    loss: Any = None  # the objective's loss section (DPOLossConfig, ...), if it has one
    train_batch_size: int
    micro_train_batch_size: int
    save_steps: int
    eval_steps: int
    placeholder_token: str = "ки"
    reward_tokens: tuple[str, ...] | None = None
    packing: bool = False
