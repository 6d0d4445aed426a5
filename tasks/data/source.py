"""The data keys every flow's `data` section shares: which column is the input (and the
label), the chat template or input template that turns it into model input, a row cap.

RL prompt data (`DataConfig`, here so the driver reads it without torch) and offline
datasets extend it with their own sources and shapes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from alignflow.errors import require


@dataclass(frozen=True, kw_only=True)
class DataSource:
    """Columns and templating of a dataset (OpenRLHF's names).

    input_key: the column holding the input (a string, or a list of chat messages)
    label_key: the column holding a reference answer for rewards (null: none)
    apply_chat_template: render inputs with the tokenizer's chat template
    input_template: a format string the input is put into, e.g. "Q: {}\\nA:"
    max_samples: read at most this many rows (null: all)
    """

    input_key: str = "input"
    label_key: str | None = None
    apply_chat_template: bool = False
    input_template: str | None = None
    max_samples: int | None = None

    def __post_init__(self) -> None:
        if self.max_samples is not None:
            require(self.max_samples >= 1, "max_samples", "an integer >= 1 or null",
                    self.max_samples)


@dataclass(frozen=True, kw_only=True)
class DataConfig(DataSource):
    """Where prompts come from and how they become model input (OpenRLHF 0.11's `data.*`).

    prompt_dataset: dataset spec(s), comma-separated (HF name, local file/folder, alignflow:NAME)
    prompt_probs: mixing probabilities of the prompt datasets, comma-separated
    prompt_split: the split to read (default: the dataset's only or first split)
    prompt_max_len: without max_len: prompts longer than this many tokens are dropped
    max_len: tokens of prompt + response (OpenRLHF's): a prompt longer than max_len - rollout.max_new_tokens is cut (null: prompt_max_len applies)
    truncation_side: which end of an over-long prompt is cut: left keeps its last tokens (OpenRLHF >= v0.9.1), right its first (OpenRLHF <= v0.9.0)
    shuffle: visit prompts in a seeded random order (else in dataset order)
    """

    prompt_dataset: str = "alignflow:gsm8k"
    prompt_probs: str | None = None
    prompt_split: str | None = "train"
    prompt_max_len: int = 256
    max_len: int | None = 2048
    max_samples: int | None = 100_000_000
    truncation_side: Literal["left", "right"] = "left"
    shuffle: bool = True

    def __post_init__(self) -> None:
        super().__post_init__()
        require(self.prompt_max_len >= 1, "prompt_max_len", "an integer >= 1",
                self.prompt_max_len)
        if self.max_len is not None:
            require(self.max_len >= 2, "max_len", "an integer >= 2 or null", self.max_len)

    def prompt_limit(self, max_new_tokens: int | None) -> tuple[int, str]:
        """(token limit, what happens past it) for prompts: OpenRLHF's left truncation to
        max_len - max_new_tokens (at least one token of room) when max_len is set, else
        dropping past prompt_max_len."""
        if self.max_len is None:
            return self.prompt_max_len, "drop"
        return max(1, self.max_len - (max_new_tokens or 1)), (
            "truncate" if self.truncation_side == "left" else "truncate_right")
