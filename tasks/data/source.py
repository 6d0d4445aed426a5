"""The data keys every flow's `data` section shares: which column is the input (and the
label), the chat template or input template that turns it into model input, a row cap.

RL prompt data and offline datasets extend it with their own sources and shapes.
"""

from __future__ import annotations

from dataclasses import dataclass

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
