"""A tiny Llama and its byte-level BPE tokenizer, built offline for tests.

Everything is derived from code: a generated corpus (arithmetic Q/A, digits, common words,
ChatML snippets), a 512-token BPE tokenizer trained on it, and a <1M-parameter Llama whose
weights come from a fixed seed. Built once per cache folder (see `cache.build_once`).
"""

from __future__ import annotations

import hashlib
import json
import os
import random
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    GenerationConfig,
    LlamaConfig,
    LlamaForCausalLM,
    LlamaForSequenceClassification,
)

from alignflow.tasks.zoo.cache import build_once
from alignflow.tasks.zoo.chat import CHATML_TEMPLATE, ENDOFTEXT, IM_END, IM_START, wrap_tokenizer

BUILD_VERSION = 1
VOCAB_SIZE = 512
PAD = "<|pad|>"
SPECIAL_TOKENS = [ENDOFTEXT, IM_START, IM_END, PAD]  # ids 0..3
SEED = 1234
MODEL_CONFIG = dict(
    vocab_size=VOCAB_SIZE, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
    tie_word_embeddings=True, rms_norm_eps=1e-6, rope_theta=10000.0,
)
_WORDS_TEXT = (
    "the of and to a in is it you that he was for on are with as I his they be at one have "
    "this from or had by word but what some we can out other were all there when up use your "
    "how said an each she which do their time if will way about many then them write would "
    "like so these her long make thing see him two has look more day could go come did number "
    "sound no most people my over know water than call first who may down side been now find "
    "answer question solve step total sum equals plus minus times divided eggs apples dollars "
    "Paris France capital city helpful assistant user system yes correct wrong"
)
WORDS = _WORDS_TEXT.split()


def corpus(n_lines: int = 4000, seed: int = 0) -> list[str]:
    """Deterministic training text: arithmetic Q/A, word salad and ChatML turns."""
    rng = random.Random(seed)
    lines = []
    for i in range(n_lines):
        a, b = rng.randint(0, 999), rng.randint(0, 99)
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 12)))
        kind = i % 3
        if kind == 0:
            lines.append(f"Question: What is {a} + {b}?\nAnswer: {a} + {b} = {a + b}. #### {a + b}")
        elif kind == 1:
            lines.append(words.capitalize() + rng.choice([".", "?", "!", ",", ":"]))
        else:
            lines.append(f"{IM_START}user\n{words}?{IM_END}\n{IM_START}assistant\n{a * b}{IM_END}\n")
    return lines


def train_tokenizer(lines: list[str]) -> Tokenizer:
    """Byte-level BPE with digits split one by one (as SmolLM2), specials at ids 0..3."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE, special_tokens=SPECIAL_TOKENS, show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(lines, trainer=trainer)
    return tok


def _config(**extra) -> LlamaConfig:
    return LlamaConfig(
        **MODEL_CONFIG, bos_token_id=None, eos_token_id=SPECIAL_TOKENS.index(IM_END),
        pad_token_id=SPECIAL_TOKENS.index(PAD), **extra,
    )


def _save_tokenizer(folder: Path) -> None:
    tok = wrap_tokenizer(train_tokenizer(corpus()), pad_token=PAD,
                         chat_template=CHATML_TEMPLATE, model_max_length=512)
    tok.save_pretrained(folder)


def _build_lm(folder: Path) -> None:
    _save_tokenizer(folder)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(_config())
    model.generation_config = GenerationConfig(
        eos_token_id=model.config.eos_token_id, pad_token_id=model.config.pad_token_id)
    model.save_pretrained(folder, safe_serialization=True)


def _build_rm(folder: Path) -> None:
    _save_tokenizer(folder)
    torch.manual_seed(SEED + 1)
    LlamaForSequenceClassification(_config(num_labels=1)).save_pretrained(
        folder, safe_serialization=True)


def build_key(kind: str) -> str:
    """Hash of everything the tiny build depends on; a change triggers a rebuild."""
    spec = {"kind": kind, "version": BUILD_VERSION, "config": MODEL_CONFIG, "seed": SEED,
            "specials": SPECIAL_TOKENS, "corpus": hashlib.sha256(
                "\n".join(corpus()).encode()).hexdigest()}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def build_tiny_model(folder: str | os.PathLike) -> Path:
    """Tiny `LlamaForCausalLM` + tokenizer in `folder` (built once; rebuilt if incomplete)."""
    return build_once(folder, build_key("lm"), _build_lm)


def build_tiny_reward_model(folder: str | os.PathLike) -> Path:
    """Tiny `LlamaForSequenceClassification` (num_labels=1) sharing the tiny tokenizer."""
    return build_once(folder, build_key("rm"), _build_rm)
