"""Turn dataset rows into model-ready text: RL prompts, preference pairs, SFT samples.

Options follow OpenRLHF's (`input_key`, `label_key`, `apply_chat_template`,
`input_template`, `prompt_max_len`, `prompt_key/chosen_key/rejected_key`, `output_key`).
Each helper returns `Prepared(rows, dropped, truncated)` so callers can log what was lost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from alignflow.errors import ConfigError

if TYPE_CHECKING:  # the checks here run on the driver too, on rows read without it
    import datasets

Overlong = Literal["drop", "truncate", "truncate_right"]


@dataclass(frozen=True)
class Prepared:
    """Prepared rows plus how many source rows were dropped or truncated for length."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    dropped: int = 0
    truncated: int = 0

    def to_dataset(self) -> datasets.Dataset:
        import datasets  # a worker's step builds it

        return datasets.Dataset.from_list(self.rows)


def require_keys(dataset: datasets.Dataset, *keys: str | None) -> None:
    """One-line ConfigError naming the missing key, the dataset and the keys it has."""
    for key in keys:
        if key is not None and key not in dataset.column_names:
            name = dataset.info.dataset_name or "<in-memory dataset>"
            raise ConfigError(f"key {key!r} not found in dataset {name!r}; "
                              f"its keys are {dataset.column_names}")


def as_messages(value: Any, role: str = "user") -> list[dict[str, str]]:
    """A string becomes one message of `role`; a list of messages is kept."""
    if isinstance(value, str):
        return [{"role": role, "content": value}]
    if isinstance(value, list) and all(isinstance(m, dict) and "role" in m for m in value):
        return [{"role": m["role"], "content": m["content"]} for m in value]
    raise ConfigError(f"expected a string or a list of {{role, content}} messages, "
                      f"got {type(value).__name__}")


def render(tokenizer, messages: list[dict], *, generation_prompt: bool) -> str:
    """The chat template applied as text."""
    if tokenizer is None or not getattr(tokenizer, "chat_template", None):
        raise ConfigError("apply_chat_template=True needs a tokenizer with a chat_template")
    return tokenizer.apply_chat_template(messages, tokenize=False,
                                         add_generation_prompt=generation_prompt)


def format_input(value: Any, *, input_template: str | None, tokenizer, chat: bool) -> str:
    """Prompt text: the chat template, else `input_template.format(text)` (as OpenRLHF: the
    template is for plain-text prompts only)."""
    if isinstance(value, str) and input_template and not chat:
        value = input_template.format(value)
    if chat:
        return render(tokenizer, as_messages(value), generation_prompt=True)
    if not isinstance(value, str):
        raise ConfigError("message-list inputs need apply_chat_template=True")
    return value


def _fit(text: str, tokenizer, max_len: int | None, overlong: Overlong) -> tuple[str | None, bool]:
    """(text, truncated) within `max_len` tokens; None when dropped. `truncate` keeps the
    prompt's end, `truncate_right` its start."""
    if max_len is None:
        return text, False
    if tokenizer is None:
        raise ConfigError("prompt_max_len needs a tokenizer to count tokens")
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if len(ids) <= max_len:
        return text, False
    if overlong == "drop":
        return None, False
    kept = ids[:max_len] if overlong == "truncate_right" else ids[-max_len:]
    return tokenizer.decode(kept), True


def refuse_empty(dataset: datasets.Dataset, key: str) -> None:
    """One line naming the rows whose input is missing or empty."""
    empty = [i for i, v in enumerate(dataset[key]) if v is None or (isinstance(v, str | list)
                                                                  and not v)]
    if empty:
        name = dataset.info.dataset_name or "<in-memory dataset>"
        shown = ", ".join(map(str, empty[:10])) + (", ..." if len(empty) > 10 else "")
        raise ConfigError(f"dataset {name!r}: {len(empty)} rows have an empty {key!r} (rows "
                          f"{shown}); expected a prompt in every row")


def prepare_prompts(
    dataset: datasets.Dataset,
    tokenizer=None,
    *,
    input_key: str = "input",
    label_key: str | None = None,
    apply_chat_template: bool = False,
    input_template: str | None = None,
    prompt_max_len: int | None = None,
    overlong: Overlong = "drop",
) -> Prepared:
    """RL prompts: rows `{prompt_id, prompt, label, datasource}`; `prompt_id` is the source
    row index, `datasource` the row's own `datasource` column (OpenRLHF's; else None)."""
    require_keys(dataset, input_key, label_key)
    refuse_empty(dataset, input_key)
    rows, dropped, truncated = [], 0, 0
    for index, row in enumerate(dataset):
        text = format_input(row[input_key], input_template=input_template,
                            tokenizer=tokenizer, chat=apply_chat_template)
        text, cut = _fit(text, tokenizer, prompt_max_len, overlong)
        if text is None:
            dropped += 1
            continue
        truncated += cut
        label = row[label_key] if label_key else ""
        source = row.get("datasource")
        rows.append({"prompt_id": index, "prompt": text, "label": label,
                     "datasource": None if source is None else str(source)})
    return Prepared(rows, dropped, truncated)
