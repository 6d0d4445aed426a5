"""A decoder-only model's shape, read from its config.json alone (no weights): what the
memory model counts parameters, KV cache and activations from.

The count is a Llama-family block (the architecture of every model OpenRLHF's examples
train: Llama, Qwen2, Mistral, SmolLM2): attention q/k/v/o (grouped-query: k and v are
`kv_heads × head_dim` wide, Qwen2 adds q/k/v biases), a SwiGLU MLP (gate, up, down), two
RMSNorms per layer and a final one, an embedding and an LM head (one matrix when tied).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alignflow.errors import ConfigError

KEYS = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
        "vocab_size")
BIASED = ("qwen2",)  # model types whose q/k/v projections carry biases
LINEARS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True, kw_only=True)
class ModelShape:
    """The numbers of a config.json the memory model reads; `source` says where they came
    from (a folder, a Hub id's cached config, or the table of published configs)."""

    name: str
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool = False
    head_dim: int = 0  # 0: hidden / heads
    qkv_bias: bool = False
    max_positions: int = 0  # max_position_embeddings (0: not given)
    source: str = ""

    @property
    def dim(self) -> int:
        return self.head_dim or self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        return self.kv_heads * self.dim

    def linear(self, name: str) -> tuple[int, int]:
        """(in, out) features of one of a layer's linear layers (`LINEARS`)."""
        h, q, kv, i = self.hidden, self.heads * self.dim, self.kv_dim, self.intermediate
        return {"q_proj": (h, q), "k_proj": (h, kv), "v_proj": (h, kv), "o_proj": (q, h),
                "gate_proj": (h, i), "up_proj": (h, i), "down_proj": (i, h)}[name]

    @property
    def layer_params(self) -> int:
        """One decoder layer: its linear layers, q/k/v biases where the family has them,
        two RMSNorm weights."""
        weights = sum(a * b for a, b in map(self.linear, LINEARS))
        bias = (self.heads * self.dim + 2 * self.kv_dim) if self.qkv_bias else 0
        return weights + bias + 2 * self.hidden

    @property
    def embedding_params(self) -> int:
        """The embedding and the LM head (one matrix when tied)."""
        return self.vocab * self.hidden * (1 if self.tied else 2)

    @property
    def params(self) -> int:
        return self.layers * self.layer_params + self.embedding_params + self.hidden

    @property
    def largest_tensor(self) -> int:
        """Elements of the largest single parameter (the embedding, or an MLP matrix): what
        ZeRO-3 gathers at once for a save or a sync."""
        return max(self.vocab * self.hidden, self.hidden * self.intermediate)

    def lora_params(self, rank: int, targets: tuple[str, ...]) -> int:
        """Trainable LoRA parameters: r × (in + out) for every adapted linear layer
        (peft's `all-linear` adapts every one but the LM head)."""
        names = LINEARS if "all-linear" in targets else \
            [n for n in LINEARS if any(n.endswith(t) or t.endswith(n) for t in targets)]
        return self.layers * rank * sum(sum(self.linear(n)) for n in names)

    def kv_bytes_per_token(self, dtype_bytes: float, tensor_parallel: int = 1) -> float:
        """K and V of every layer for one token: 2 × layers × kv_heads × head_dim × dtype
        bytes, split over tensor-parallel ranks (replicated when kv_heads < ranks)."""
        heads = max(self.kv_heads / tensor_parallel, 1.0)
        return 2 * self.layers * heads * self.dim * dtype_bytes


def shape_of_config(config: dict[str, Any], name: str, source: str) -> ModelShape:
    """The shape of a config.json's dict; ConfigError naming the key it lacks."""
    missing = [k for k in KEYS if not isinstance(config.get(k), int)]
    if missing:
        raise ConfigError(f"model {name!r}: its config.json ({source}) has no integer "
                          f"{missing[0]!r}; expected a decoder-only causal LM's config")
    heads = config["num_attention_heads"]
    return ModelShape(
        name=name, hidden=config["hidden_size"], intermediate=config["intermediate_size"],
        layers=config["num_hidden_layers"], heads=heads,
        kv_heads=config.get("num_key_value_heads") or heads, vocab=config["vocab_size"],
        tied=bool(config.get("tie_word_embeddings", False)),
        head_dim=config.get("head_dim") or 0,
        qkv_bias=bool(config.get("attention_bias", config.get("model_type") in BIASED)),
        max_positions=config.get("max_position_embeddings") or 0, source=source)
