"""Prompt, preference-pair and SFT preparation with the tiny tokenizer's ChatML template."""

from __future__ import annotations

import datasets
import pytest
from transformers import AutoTokenizer

from alignflow.errors import ConfigError
from alignflow.tasks.data import (
    load_dataset_spec,
    prepare_preferences,
    prepare_prompts,
    prepare_sft,
)

U, A, E = "<|im_start|>user\n", "<|im_start|>assistant\n", "<|im_end|>\n"


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def _ds(rows, name="toy"):
    ds = datasets.Dataset.from_list(rows)
    ds.info.dataset_name = name
    return ds


def test_prompts_plain_template():
    ds = _ds([{"q": "1+1?", "y": "2"}, {"q": "2+3?", "y": "5"}])
    out = prepare_prompts(ds, input_key="q", label_key="y", input_template="Question: {}\nAnswer:")
    assert out.rows == [
        {"prompt_id": 0, "prompt": "Question: 1+1?\nAnswer:", "label": "2", "datasource": None},
        {"prompt_id": 1, "prompt": "Question: 2+3?\nAnswer:", "label": "5", "datasource": None},
    ]
    sourced = prepare_prompts(_ds([{"q": "1+1?", "datasource": "math"}]), input_key="q")
    assert sourced.rows[0]["datasource"] == "math"  # OpenRLHF's eval reports per source
    assert (out.dropped, out.truncated) == (0, 0)


def test_prompts_chat_template(tok):
    ds = _ds([{"q": "hi", "y": "1"}])
    out = prepare_prompts(ds, tok, input_key="q", label_key="y", apply_chat_template=True,
                          input_template="Q: {}")  # as OpenRLHF: unused with a chat template
    assert out.rows == [{"prompt_id": 0, "prompt": f"{U}hi{E}{A}", "label": "1",
                         "datasource": None}]


def test_prompts_message_list_input(tok):
    ds = _ds([{"m": [{"role": "system", "content": "s"}, {"role": "user", "content": "yo"}]}])
    out = prepare_prompts(ds, tok, input_key="m", apply_chat_template=True)
    assert out.rows == [{"prompt_id": 0, "prompt": f"<|im_start|>system\ns{E}{U}yo{E}{A}",
                         "label": "", "datasource": None}]


def test_prompt_max_len_drop_and_truncate(tok):
    ds = _ds([{"q": "1 2"}, {"q": "1 2 3 4 5 6 7 8 9"}])
    dropped = prepare_prompts(ds, tok, input_key="q", prompt_max_len=5)
    assert [r["prompt_id"] for r in dropped.rows] == [0] and dropped.dropped == 1
    cut = prepare_prompts(ds, tok, input_key="q", prompt_max_len=5, overlong="truncate")
    assert cut.truncated == 1 and cut.rows[1]["prompt"] == "7 8 9"  # keeps the end; digits and spaces are tokens
    assert len(tok(cut.rows[1]["prompt"])["input_ids"]) == 5


def test_missing_key_error_names_key_dataset_and_keys():
    ds = load_dataset_spec("alignflow:gsm8k")
    with pytest.raises(ConfigError) as exc:
        prepare_prompts(ds, input_key="prompt", label_key="label")
    assert str(exc.value) == ("key 'prompt' not found in dataset 'alignflow:gsm8k'; "
                              "its keys are ['question', 'answer', 'label', 'input']")
    with pytest.raises(ConfigError, match=r"key 'good' not found in dataset 'toy'"):
        prepare_preferences(_ds([{"prompt": "p", "chosen": "c", "rejected": "r"}]),
                            chosen_key="good")


def test_preferences_strings_and_chat(tok):
    ds = _ds([{"prompt": "2+2?", "chosen": "4", "rejected": "5"}])
    plain = prepare_preferences(ds, input_template="Q: {}\nA:")
    assert plain.rows == [{"pair_id": 0, "prompt": "Q: 2+2?\nA:", "chosen": "4", "rejected": "5",
                           "margin": None}]
    chat = prepare_preferences(ds, tok, apply_chat_template=True)
    assert chat.rows[0] == {"pair_id": 0, "prompt": f"{U}2+2?{E}{A}",
                            "chosen": f"4{E}", "rejected": f"5{E}", "margin": None}
    margins = _ds([{"prompt": "p", "chosen": "c", "rejected": "r", "margin": m}
                   for m in (1.5, None)])
    assert [r["margin"] for r in prepare_preferences(margins).rows] == [1.5, None]


def test_preferences_full_conversations(tok):
    conv = lambda reply: [{"role": "user", "content": "hi"},  # noqa: E731
                          {"role": "assistant", "content": reply}]
    ds = _ds([{"prompt": "hi", "chosen": conv("hello"), "rejected": conv("go away")}])
    out = prepare_preferences(ds, tok, apply_chat_template=True)
    assert (out.rows[0]["chosen"], out.rows[0]["rejected"]) == (f"hello{E}", f"go away{E}")
    no_prompt = prepare_preferences(ds, tok, prompt_key=None, apply_chat_template=True)
    assert no_prompt.rows[0]["prompt"] == f"{U}hi{E}{A}"  # OpenRLHF: chosen[:-1]
    assert no_prompt.rows[0]["chosen"] == f"hello{E}"
    limited = prepare_preferences(ds, tok, apply_chat_template=True, max_len=8)
    assert (limited.rows, limited.dropped) == ([], 1)


def test_champ_pairs_prepare(tok):
    ds = load_dataset_spec("alignflow:champ-pairs").select(range(4))
    out = prepare_preferences(ds, tok, apply_chat_template=True)
    assert len(out.rows) == 4 and all(r["prompt"].endswith(A) for r in out.rows)


def _masked_text(tok, row):
    return tok.decode([t for t, m in zip(row["input_ids"], row["loss_mask"], strict=True) if m])


def test_sft_single_turn_mask(tok):
    ds = _ds([{"input": "1+1?", "output": "2"}])
    row = prepare_sft(ds, tok).rows[0]
    assert row["text"] == f"{U}1+1?{E}{A}2{E}"
    assert _masked_text(tok, row) == "2<|im_end|>"  # reply + end of turn, not the newline
    assert row["input_ids"] == tok(row["text"])["input_ids"]
    assert sum(row["loss_mask"]) == 2


def test_sft_multi_turn_masks_assistant_only(tok):
    msgs = [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"},
            {"role": "assistant", "content": "hello"}, {"role": "user", "content": "2+2?"},
            {"role": "assistant", "content": "4"}]
    row = prepare_sft(_ds([{"messages": msgs}]), tok, input_key="messages",
                      output_key=None).rows[0]
    assert _masked_text(tok, row) == "hello<|im_end|>4<|im_end|>"
    assert row["loss_mask"][-1] == 0  # the trailing newline after the last <|im_end|>


def test_sft_plain_and_truncation(tok):
    ds = _ds([{"input": "Q: 3+4?\nA:", "output": " 7"}])
    row = prepare_sft(ds, tok, apply_chat_template=False).rows[0]
    assert row["text"] == "Q: 3+4?\nA: 7<|im_end|>"
    assert _masked_text(tok, row) == " 7<|im_end|>"
    cut = prepare_sft(ds, tok, apply_chat_template=False, max_len=4)
    assert cut.truncated == 1 and len(cut.rows[0]["input_ids"]) == 4
    assert len(cut.rows[0]["loss_mask"]) == 4


def test_pairs_without_a_prompt_column_split_chosen_as_openrlhf(tok):
    """OpenRLHF's common HF shape: chosen and rejected are whole conversations."""
    user = {"role": "user", "content": "2+2?"}
    ds = datasets.Dataset.from_list([{
        "chosen": [user, {"role": "assistant", "content": "4"}],
        "rejected": [user, {"role": "assistant", "content": "5"}]}])
    rows = prepare_preferences(ds, tok, prompt_key=None, apply_chat_template=True).rows
    assert rows[0]["prompt"] == f"{U}2+2?{E}{A}"
    assert rows[0]["chosen"].startswith("4") and rows[0]["rejected"].startswith("5")


def test_empty_prompts_are_refused_with_their_rows():
    ds = _ds([{"q": "a"}, {"q": ""}, {"q": None}, {"q": "b"}])
    with pytest.raises(ConfigError, match=r"dataset 'toy': 2 rows have an empty 'q' \(rows 1, 2\)"):
        prepare_prompts(ds, input_key="q")
