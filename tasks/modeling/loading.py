"""Loading HF models and tokenizers the way the engines and trainers expect them."""

from __future__ import annotations

from typing import Literal

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.utils import logging as hf_logging

# Loading a model is quick next to a run; its per-shard bars only clutter run output.
hf_logging.disable_progress_bar()

Dtype = Literal["fp32", "bf16"]
DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16}


def load_causal_lm(path: str, *, dtype: Dtype = "fp32", attn_implementation: str = "sdpa"):
    """A causal LM from a local HF folder (never the hub), in eval mode."""
    model = AutoModelForCausalLM.from_pretrained(
        path, dtype=DTYPES[dtype], attn_implementation=attn_implementation, local_files_only=True
    )
    return model.eval()


def load_tokenizer(path: str, *, padding_side: Literal["left", "right"] = "left"):
    """A tokenizer with a pad token (EOS when the folder names none)."""
    tok = AutoTokenizer.from_pretrained(path, local_files_only=True)
    tok.padding_side = padding_side
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    return tok
