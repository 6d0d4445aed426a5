"""Fixtures for the vLLM engine tests (run by `make test-vllm` in `.venv-vllm`).

vLLM's CPU attention supports head sizes 32, 64, 80, ... but the shared tiny Llama has 16,
so these tests use a sibling built the same way: same tokenizer, config and seed, with
2 attention heads (1 KV head) of size 32. Built once into the models cache, like the others.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from alignflow.tasks.zoo.cache import build_once
from alignflow.tasks.zoo.registry import models_dir
from alignflow.tasks.zoo.tiny import MODEL_CONFIG, SEED, build_key

HEADS = {"num_attention_heads": 2, "num_key_value_heads": 1}
MODEL_FILES = {"config.json", "generation_config.json", "model.safetensors"}


def _build(tiny_dir: Path, folder: Path) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    for path in tiny_dir.iterdir():
        if path.is_file() and path.name not in MODEL_FILES and not path.name.startswith("."):
            shutil.copy(path, folder / path.name)
    source = LlamaConfig.from_pretrained(tiny_dir)
    config = LlamaConfig(**{**MODEL_CONFIG, **HEADS}, bos_token_id=None,
                         eos_token_id=source.eos_token_id, pad_token_id=source.pad_token_id)
    torch.manual_seed(SEED)
    model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(eos_token_id=config.eos_token_id,
                                               pad_token_id=config.pad_token_id)
    model.save_pretrained(folder, safe_serialization=True)


def build_tiny_hd32(tiny_dir: Path) -> Path:
    """The head-size-32 sibling of the tiny Llama in the models cache (also bench/vllm_grpo.py)."""
    key = hashlib.sha256(f"{build_key('lm')}:{sorted(HEADS.items())}".encode()).hexdigest()
    return build_once(models_dir() / "tiny-llama-hd32", key,
                      lambda folder: _build(Path(tiny_dir), folder))


@pytest.fixture(scope="session")
def vllm_model_dir(tiny_model_dir) -> Path:
    """Tiny Llama (head size 32) + the tiny tokenizer; eos `<|im_end|>` = 2, pad = 3."""
    return build_tiny_hd32(Path(tiny_model_dir))
