"""Published configs of well-known models, written down so a plan for them is made offline
(a 70B plan on a laptop), and how a run's model name becomes a shape.

Each entry is the listed keys of the model's config.json on the Hugging Face Hub, as its
publisher released it (source: `https://huggingface.co/<id>/blob/main/config.json`).
OpenRLHF's example checkpoints are fine-tunes of Meta-Llama-3-8B and keep its shape.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from alignflow.tasks.plan.memory.shape import ModelShape, shape_of_config

LLAMA3_8B = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
                 num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                 max_position_embeddings=8192, tie_word_embeddings=False)
PUBLISHED: dict[str, dict] = {
    "meta-llama/Meta-Llama-3-8B": LLAMA3_8B,
    "meta-llama/Meta-Llama-3-70B": dict(
        hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
        num_attention_heads=64, num_key_value_heads=8, vocab_size=128256,
        max_position_embeddings=8192, tie_word_embeddings=False),
    "meta-llama/Llama-2-7b-hf": dict(
        hidden_size=4096, intermediate_size=11008, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=32, vocab_size=32000,
        max_position_embeddings=4096, tie_word_embeddings=False),
    "meta-llama/Llama-2-13b-hf": dict(
        hidden_size=5120, intermediate_size=13824, num_hidden_layers=40,
        num_attention_heads=40, num_key_value_heads=40, vocab_size=32000,
        max_position_embeddings=4096, tie_word_embeddings=False),
    "meta-llama/Llama-2-70b-hf": dict(
        hidden_size=8192, intermediate_size=28672, num_hidden_layers=80,
        num_attention_heads=64, num_key_value_heads=8, vocab_size=32000,
        max_position_embeddings=4096, tie_word_embeddings=False),
    "Qwen/Qwen2.5-7B": dict(
        hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
        max_position_embeddings=131072, tie_word_embeddings=False, model_type="qwen2"),
    "HuggingFaceTB/SmolLM2-135M": dict(
        hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, vocab_size=49152,
        max_position_embeddings=8192, tie_word_embeddings=True),
}
SAME_SHAPE = {  # fine-tunes (and an instruct variant) with their base model's config
    "OpenRLHF/Llama-3-8b-sft-mixture": "meta-llama/Meta-Llama-3-8B",
    "OpenRLHF/Llama-3-8b-rm-mixture": "meta-llama/Meta-Llama-3-8B",
    "OpenRLHF/Llama-3-8b-rm-700k": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Meta-Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Llama-3.1-8B": "meta-llama/Meta-Llama-3-8B",
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Meta-Llama-3-8B",
    "smollm2-135m": "HuggingFaceTB/SmolLM2-135M",  # alignflow's offline name
}


def published(name: str) -> ModelShape | None:
    """The shape of a model in the table (its Hub id, case-insensitive), else None."""
    by_lower = {k.lower(): k for k in (*PUBLISHED, *SAME_SHAPE)}
    key = by_lower.get(name.strip().lower())
    if key is None:
        return None
    base = SAME_SHAPE.get(key, key)
    return shape_of_config(PUBLISHED[base], name,
                           f"published config.json of {base} (tasks/plan/memory/known.py)")


def model_shape(name: str, read: Callable[[str], dict | None] | None = None) -> ModelShape | None:
    """`name`'s shape: a local folder's config.json, else the table's (no network for a
    model it lists), else what `read` finds without weights (the CLI passes
    `zoo.registry.model_config`: a cached Hub id, a prepared offline name); None when
    none has it."""
    local = Path(name).expanduser()
    if not (local / "config.json").is_file():
        found = published(name)
        if found is not None:
            return found
    config = read(name) if read is not None else None
    if config is None and (local / "config.json").is_file():
        config = json.loads((local / "config.json").read_text())
    return shape_of_config(config, name, f"{name}/config.json") if config is not None else None
