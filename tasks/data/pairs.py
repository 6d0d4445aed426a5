"""Preference pairs and SFT samples as text / token ids, with chat templates.

Chosen/rejected may be strings (an assistant reply) or message lists (a reply, or a whole
conversation that starts with the prompt; with no prompt column, as in OpenRLHF's default
`prompt_key=None`, the turns before chosen's last reply are the prompt). SFT samples carry a loss mask that is 1 on the
assistant turns only, found by rendering the conversation turn by turn.
"""

from __future__ import annotations

from typing import Any

import datasets

from alignflow.errors import ConfigError
from alignflow.tasks.data.prompts import Prepared, as_messages, format_input, render, require_keys


def _reply(prompt_msgs: list[dict], value: Any) -> list[dict]:
    msgs = as_messages(value, role="assistant")
    if prompt_msgs and msgs[: len(prompt_msgs)] == prompt_msgs:
        return msgs  # a whole conversation that repeats the prompt
    return prompt_msgs + msgs


def _shared_turns(chosen: Any) -> list[dict]:
    """Without a prompt column, as OpenRLHF: when `chosen` is a whole conversation, its
    turns before the last reply are the prompt (`rejected` must start with them too)."""
    if isinstance(chosen, list) and len(chosen) > 1:
        return as_messages(chosen)[:-1]
    return []


def _pair_text(row: dict, keys: tuple[str | None, str, str], tokenizer, chat: bool,
               input_template: str | None) -> tuple[str, str, str]:
    prompt_key, chosen_key, rejected_key = keys
    if not chat:
        prompt = format_input(row[prompt_key], input_template=input_template,
                              tokenizer=None, chat=False) if prompt_key else ""
        if not isinstance(row[chosen_key], str) or not isinstance(row[rejected_key], str):
            raise ConfigError("message-list chosen/rejected need apply_chat_template=True")
        return prompt, row[chosen_key], row[rejected_key]
    prompt_value = row[prompt_key] if prompt_key else _shared_turns(row[chosen_key])
    prompt_msgs = as_messages(prompt_value) if prompt_value else []
    prompt = render(tokenizer, prompt_msgs, generation_prompt=True) if prompt_msgs else ""
    out = []
    for key in (chosen_key, rejected_key):
        full = render(tokenizer, _reply(prompt_msgs, row[key]), generation_prompt=False)
        if not full.startswith(prompt):
            raise ConfigError(f"chat template output for {key!r} does not start with the prompt")
        out.append(full[len(prompt):])
    return prompt, out[0], out[1]


def _n_tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text, add_special_tokens=False)["input_ids"])


def prepare_preferences(
    dataset: datasets.Dataset,
    tokenizer=None,
    *,
    prompt_key: str | None = "prompt",
    chosen_key: str = "chosen",
    rejected_key: str = "rejected",
    apply_chat_template: bool = False,
    input_template: str | None = None,
    max_len: int | None = None,
) -> Prepared:
    """Rows `{pair_id, prompt, chosen, rejected, margin}` (texts; prompt + chosen = full
    sample; margin: the row's `margin` column, as OpenRLHF's reward data reads it, or None).

    Pairs whose prompt + chosen or prompt + rejected exceed `max_len` tokens are dropped.
    """
    require_keys(dataset, prompt_key, chosen_key, rejected_key)
    if max_len is not None and tokenizer is None:
        raise ConfigError("max_len needs a tokenizer to count tokens")
    rows, dropped = [], 0
    for index, row in enumerate(dataset):
        prompt, chosen, rejected = _pair_text(row, (prompt_key, chosen_key, rejected_key),
                                              tokenizer, apply_chat_template, input_template)
        if max_len is not None and max(_n_tokens(tokenizer, prompt + chosen),
                                       _n_tokens(tokenizer, prompt + rejected)) > max_len:
            dropped += 1
            continue
        rows.append({"pair_id": index, "prompt": prompt, "chosen": chosen, "rejected": rejected,
                     "margin": _margin(row, index)})
    return Prepared(rows, dropped)


def _margin(row: dict, index: int) -> float | None:
    """The pair's `margin` (OpenRLHF: `data["margin"]` when present and not None)."""
    value = row.get("margin")
    if value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"preference row {index}: margin={value!r}; expected a number or "
                          "null") from None


def _sft_messages(row: dict, input_key: str, output_key: str | None) -> list[dict]:
    if output_key is None:
        return as_messages(row[input_key])
    return as_messages(row[input_key]) + as_messages(row[output_key], role="assistant")


def _assistant_spans(tokenizer, messages: list[dict]) -> tuple[str, list[tuple[int, int]]]:
    """Full text and the char spans of assistant turns (reply + end-of-turn token)."""
    spans = []
    for i, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        before = render(tokenizer, messages[:i], generation_prompt=True) if i else ""
        upto = render(tokenizer, messages[: i + 1], generation_prompt=False)
        if not upto.startswith(before):
            raise ConfigError("chat template is not prefix-stable; cannot mask assistant turns")
        spans.append((len(before), len(upto.rstrip())))
    return render(tokenizer, messages, generation_prompt=False), spans


def _plain_spans(tokenizer, row: dict, input_key: str, output_key: str | None,
                 input_template: str | None) -> tuple[str, list[tuple[int, int]]]:
    prompt = format_input(row[input_key], input_template=input_template, tokenizer=None,
                          chat=False)
    response = row[output_key] if output_key else ""  # OpenRLHF: "continue pretraining"
    text = prompt + response + (tokenizer.eos_token or "")
    return text, [(len(prompt), len(text))]


def sft_sample(tokenizer, text: str, spans: list[tuple[int, int]]) -> dict[str, list[int]]:
    """Token ids and a 0/1 loss mask: 1 where a token starts inside an assistant span."""
    return sft_samples(tokenizer, [text], [spans])[0]


def sft_samples(tokenizer, texts: list[str], spans: list[list[tuple[int, int]]]) -> list[dict]:
    """`sft_sample` of many texts, tokenized in one batched call."""
    if not texts:
        return []
    enc = tokenizer(texts, add_special_tokens=False, return_offsets_mapping=True)
    out = []
    for ids, offsets, sp in zip(enc["input_ids"], enc["offset_mapping"], spans, strict=True):
        mask = [int(any(a <= start < b for a, b in sp)) for start, _ in offsets]
        out.append({"input_ids": list(ids), "loss_mask": mask})
    return out


def prepare_sft(
    dataset: datasets.Dataset,
    tokenizer,
    *,
    input_key: str = "input",
    output_key: str | None = "output",
    apply_chat_template: bool = True,
    input_template: str | None = None,
    max_len: int | None = None,
) -> Prepared:
    """Rows `{sample_id, text, input_ids, loss_mask}`; `output_key=None`: `input_key` holds
    multi-turn messages (with the chat template), else the prompt alone, its loss on the end
    of text (as OpenRLHF). Samples over `max_len` tokens are truncated on the right."""
    require_keys(dataset, input_key, output_key)
    texts, spans = [], []
    for row in dataset:
        if apply_chat_template:
            messages = _sft_messages(row, input_key, output_key)
            text, sp = _assistant_spans(tokenizer, messages)
        else:
            text, sp = _plain_spans(tokenizer, row, input_key, output_key, input_template)
        texts.append(text)
        spans.append(sp)
    rows, truncated = [], 0
    for index, (text, sample) in enumerate(zip(texts, sft_samples(tokenizer, texts, spans),
                                               strict=True)):
        if max_len is not None and len(sample["input_ids"]) > max_len:
            sample = {k: v[:max_len] for k, v in sample.items()}
            truncated += 1
        rows.append({"sample_id": index, "text": text, **sample})
    return Prepared(rows, truncated=truncated)
