"""SmolLM2-135M-Instruct converted from the packaged GGUF: tokenizer and a real answer."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from alignflow.tasks.zoo.registry import resolve_model
from alignflow.tasks.zoo.smollm2 import GGUF_NAME, gguf_path

pytestmark = pytest.mark.slow

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "  two leading spaces, trailing tab\t\nand\n\nblank lines  ",
    "Prix: 1 234,56 € — naïve café, 東京, Ελληνικά, emoji 🙂🚀",
    "x = 12345678901234567890; y = -0.001e+10",
    "def f(a, b):\n    return a ** b  # comment",
    "<|im_start|>user\nhi<|im_end|>\n",
]


@pytest.fixture(scope="module")
def smol_dir():
    return resolve_model("smollm2-135m")  # prepares into the user cache on first use


@pytest.fixture(scope="module")
def tok(smol_dir):
    return AutoTokenizer.from_pretrained(smol_dir)


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(tok, text):
    assert tok.decode(tok(text)["input_ids"]) == text


def test_specials(tok):
    assert len(tok) == 49152
    assert tok.convert_tokens_to_ids(["<|endoftext|>", "<|im_start|>", "<|im_end|>"]) == [0, 1, 2]
    assert (tok.eos_token, tok.eos_token_id, tok.pad_token_id, tok.bos_token) == \
        ("<|im_end|>", 2, 2, None)
    assert tok("<|im_start|>user")["input_ids"][0] == 1
    ids = tok("Hello world")["input_ids"]
    assert ids == tok.encode("Hello world", add_special_tokens=False) and 1 not in ids
    assert [tok.decode([i]) for i in tok("2025")["input_ids"]] == ["2", "0", "2", "5"]


def test_matches_transformers_gguf_tokenizer_on_plain_text(tok):
    """Same ids as transformers' own GGUF tokenizer once its spurious bos is removed."""
    ref = AutoTokenizer.from_pretrained(str(gguf_path().parent), gguf_file=GGUF_NAME)
    for text in TEXTS[:5]:
        ref_ids = ref(text)["input_ids"]
        if ref_ids and ref_ids[0] == ref.bos_token_id:
            ref_ids = ref_ids[1:]
        assert tok(text)["input_ids"] == ref_ids, text


def test_chat_template_default_system_prompt(tok):
    user = [{"role": "user", "content": "Hi"}]
    assert tok.apply_chat_template(user, tokenize=False, add_generation_prompt=True) == (
        "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n")
    own = [{"role": "system", "content": "Be terse."}, *user]
    assert tok.apply_chat_template(own, tokenize=False).startswith(
        "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\n")


def test_capital_of_france(smol_dir, tok):
    torch.set_num_threads(2)
    model = AutoModelForCausalLM.from_pretrained(smol_dir, dtype=torch.float32).eval()
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    messages = [{"role": "user", "content": "What is the capital of France?"}]
    batch = tok.apply_chat_template(messages, add_generation_prompt=True, return_tensors="pt",
                                    return_dict=True)
    with torch.no_grad():
        out = model.generate(**batch, max_new_tokens=20, do_sample=False)
    reply = out[0, batch["input_ids"].shape[1]:].tolist()
    assert "Paris" in tok.decode(reply)
    assert reply[-1] == tok.eos_token_id  # stops at <|im_end|> within 20 tokens
