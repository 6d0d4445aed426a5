"""The tiny offline Llama: tokenizer behaviour, size, determinism, cache validity."""

from __future__ import annotations

import hashlib
import json

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoModelForSequenceClassification, AutoTokenizer

from alignflow.tasks.zoo.cache import MARKER, is_built
from alignflow.tasks.zoo.tiny import build_key, build_tiny_model

TEXTS = [
    "What is 12 + 30?",
    "  leading and   inner  spaces\n\ttabs\n",
    "Ünïcödé – naïve café 日本語 🙂",
    "1,234,567.89 and -0.5",
    "<|im_start|>user\nhi<|im_end|>\n",
]


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(tok, text):
    ids = tok(text)["input_ids"]
    assert tok.decode(ids) == text


def test_special_ids_and_no_bos(tok):
    assert len(tok) == 512
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]) \
        == [0, 1, 2, 3]
    assert (tok.eos_token, tok.eos_token_id, tok.pad_token_id) == ("<|im_end|>", 2, 3)
    assert tok.bos_token is None
    ids = tok("hello")["input_ids"]
    assert ids == tok.encode("hello", add_special_tokens=False)
    assert ids[0] not in (0, 1, 2, 3) and ids[-1] != 2
    assert tok("<|im_end|>")["input_ids"] == [2]


def test_digits_are_single_tokens(tok):
    ids = tok("2025")["input_ids"]
    assert [tok.decode([i]) for i in ids] == ["2", "0", "2", "5"]


def test_chat_template(tok):
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}]
    text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n"
                    "<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n")
    no_gen = tok.apply_chat_template(msgs[1:], tokenize=False, add_generation_prompt=False)
    assert no_gen == "<|im_start|>user\n2+2?<|im_end|>\n"


def test_model_size_config_and_generation_ids(tiny_model_dir):
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    n_params = sum(p.numel() for p in model.parameters())
    # embed 512*64 + 2 layers * (q,o 64*64*2 + k,v 64*32*2 + mlp 3*64*128 + 2 norms*64) + norm 64
    assert n_params == 512 * 64 + 2 * (2 * 64 * 64 + 2 * 64 * 32 + 3 * 64 * 128 + 128) + 64
    assert n_params < 1_000_000
    assert model.config.tie_word_embeddings
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    assert (model.generation_config.eos_token_id, model.generation_config.pad_token_id) == (2, 3)


def _digest(folder) -> dict[str, str]:
    names = ["model.safetensors", "tokenizer.json", "config.json"]
    return {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in names}


def test_build_is_deterministic(tiny_model_dir, tmp_path):
    torch.manual_seed(999)  # the build must not depend on the global RNG state
    again = build_tiny_model(tmp_path / "again")
    assert _digest(again) == _digest(tiny_model_dir)


def test_half_built_folder_is_rebuilt(tiny_model_dir, tmp_path):
    folder = build_tiny_model(tmp_path / "m")
    assert is_built(folder, build_key("lm"))
    (folder / "tokenizer.json").write_text("{}")  # corrupt: same key, wrong content
    assert not is_built(folder, build_key("lm"))
    build_tiny_model(folder)
    assert _digest(folder) == _digest(tiny_model_dir)
    (folder / MARKER).unlink()  # no marker: not trusted
    assert not is_built(folder, build_key("lm"))
    marker = json.loads((tiny_model_dir / MARKER).read_text())
    assert marker["key"] == build_key("lm")


def test_forward_is_deterministic(tiny_model_dir, tok):
    ids = torch.tensor([tok("What is 1 + 2?")["input_ids"]])
    a = AutoModelForCausalLM.from_pretrained(tiny_model_dir)(ids).logits
    b = AutoModelForCausalLM.from_pretrained(tiny_model_dir)(ids).logits
    assert a.shape == (1, ids.shape[1], 512)
    assert torch.equal(a, b)


def test_reward_model(tiny_rm_dir, tiny_model_dir):
    rm = AutoModelForSequenceClassification.from_pretrained(tiny_rm_dir)
    assert rm.config.num_labels == 1 and rm.config.pad_token_id == 3
    assert (tiny_rm_dir / "tokenizer.json").read_bytes() == \
        (tiny_model_dir / "tokenizer.json").read_bytes()
    tok = AutoTokenizer.from_pretrained(tiny_rm_dir)
    batch = tok(["a b c", "a"], padding=True, return_tensors="pt")
    scores = rm(**batch).logits
    assert scores.shape == (2, 1)
    single = rm(**tok(["a"], return_tensors="pt")).logits
    torch.testing.assert_close(scores[1], single[0])  # padding does not change the score
