"""Unpaired preference data, as OpenRLHF's KTO reads it: one row = one response with a
desirable / undesirable label (`input_key`, `output_key`, `label_key`).

Labels 1 / True are desirable, 0 / False undesirable (OpenRLHF puts them in a LongTensor,
so other values fail there too). With a chat template and `output_key`, the prompt is the
rendered input and the response the rendered reply; with a chat template and no
`output_key`, the input is a conversation whose last message is the response; without a
chat template the prompt is `input_template.format(input)` and the response the output text.
"""

from __future__ import annotations

from typing import Any

import datasets

from alignflow.errors import ConfigError
from alignflow.tasks.data.prompts import Prepared, as_messages, format_input, render, require_keys


def _label(value: Any, row: int, key: str) -> bool:
    if isinstance(value, bool) or value in (0, 1):
        return bool(value)
    raise ConfigError(f"row {row}: {key}={value!r}; expected 1/true (desirable) or 0/false "
                      "(undesirable)")


def _texts(row: dict, tokenizer, input_key: str, output_key: str | None, chat: bool,
           input_template: str | None) -> tuple[str, str]:
    if not chat:
        if output_key is None:
            raise ConfigError("unpaired data without output_key needs apply_chat_template=True "
                              "(the response is the input conversation's last message)")
        prompt = format_input(row[input_key], input_template=input_template, tokenizer=None,
                              chat=False)
        return prompt, str(row[output_key])
    if output_key is None:
        turns = as_messages(row[input_key])
        prompt_msgs, reply = turns[:-1], turns
    else:
        prompt_msgs = as_messages(row[input_key])
        reply = prompt_msgs + as_messages(row[output_key], role="assistant")
    prompt = render(tokenizer, prompt_msgs, generation_prompt=True)
    full = render(tokenizer, reply, generation_prompt=False)
    if not full.startswith(prompt):
        raise ConfigError("chat template output of a reply does not start with its prompt")
    return prompt, full[len(prompt):]


def prepare_unpaired(dataset: datasets.Dataset, tokenizer=None, *, input_key: str = "input",
                     output_key: str | None = None, label_key: str = "label",
                     apply_chat_template: bool = False,
                     input_template: str | None = None) -> Prepared:
    """Rows `{example_id, prompt, response, desirable}` (texts)."""
    require_keys(dataset, input_key, output_key, label_key)
    rows = []
    for index, row in enumerate(dataset):
        prompt, response = _texts(row, tokenizer, input_key, output_key, apply_chat_template,
                                  input_template)
        rows.append({"example_id": index, "prompt": prompt, "response": response,
                     "desirable": _label(row[label_key], index, label_key)})
    return Prepared(rows)
