"""Activation bytes of a micro-batch: what a training forward keeps for its backward, and
what a forward without gradients (reference, reward, values, old log-probs) holds at once.

Per token and decoder layer, the tensors autograd saves in Hugging Face's Llama layer
(RMSNorm, q/k/v/o, RoPE, SDPA attention, SwiGLU), counted with `saved_tensors_hooks` on
the CPU (torch 2.13, transformers 5.24, sdpa) over shapes that vary h, kv, i and heads one
at a time, and fit exactly (tests/fast/test_plan_memory_activations.py recounts them):

    bf16 weights                    20·h + 4·kv + 8·i + 4·heads bytes
    fp32 weights, bf16 autocast     30·h + 4·kv + 8·i + 4·heads, and 2 bytes a weight of
                                    every layer and the LM head (the bf16 casts autograd
                                    keeps)
    fp32                            32·h + 8·kv + 16·i + 4·heads

(h hidden, kv = kv_heads × head_dim, i intermediate; 4·heads is SDPA's fp32 log-sum-exp.)
Korthikanti et al. 2022 ("Reducing Activation Recomputation in Large Transformer Models",
§4.1) give 34·h for a GPT layer with a 4h MLP and fused attention; this is the same count
for the Llama block. With gradient checkpointing a layer keeps only its input (2·h bytes
bf16, 4·h with fp32 weights) and backward recomputes one layer at a time.

Logits: 12 bytes per vocabulary entry of each row whose logits are taken (the padded RL
path takes the response's rows, a packed or offline micro-batch every token's): at the
start of backward a loss over fp32 logits holds the saved fp32 log-softmax (or the scaled
copy `logsumexp` keeps) and two fp32 gradients of it; the forward's bf16 logits and fp32
upcast (2 + 4 + 4) are no larger. The H100 figures (164M, 8,192 tokens a micro-batch,
where logits are ~45% of the activations) are reproduced within 2% with it.
"""

from __future__ import annotations

from typing import Literal

from alignflow.tasks.plan.memory.shape import ModelShape
from alignflow.tasks.plan.memory.states import Items

Precision = Literal["bf16", "autocast", "fp32"]
LOGITS_BYTES = 12
PER_LAYER = {  # bytes per token per layer: coefficients of (h, kv, i); + 4·heads always
    "bf16": (20, 4, 8), "autocast": (30, 4, 8), "fp32": (32, 8, 16)}


def layer_bytes_per_token(shape: ModelShape, precision: Precision) -> float:
    a, b, c = PER_LAYER[precision]
    return a * shape.hidden + b * shape.kv_dim + c * shape.intermediate + 4 * shape.heads


def learn(shape: ModelShape, *, tokens: int, logit_rows: int, precision: Precision,
          checkpointing: bool, head: bool = True) -> Items:
    """What one training micro-batch of `tokens` holds at the start of its backward."""
    per_layer = layer_bytes_per_token(shape, precision)
    if checkpointing:
        kept = tokens * shape.layers * shape.hidden * (2 if precision == "bf16" else 4)
        layers = kept + tokens * per_layer  # the inputs kept, one layer recomputed
    else:
        layers = tokens * shape.layers * per_layer
    casts = 2 * (shape.layers * shape.layer_params + head * shape.vocab * shape.hidden) \
        if precision == "autocast" else 0
    out = {"activations": layers + casts}
    if head:
        out["logits"] = LOGITS_BYTES * shape.vocab * logit_rows
    return out


def forward(shape: ModelShape, *, tokens: int, logit_rows: int, precision: Precision,
            head: bool = True) -> Items:
    """A forward without gradients: one layer's tensors at a time, and the logits."""
    out = {"forward activations": tokens * layer_bytes_per_token(shape, precision)}
    if head:
        out["logits"] = LOGITS_BYTES * shape.vocab * logit_rows
    return out


def precision_of(module_bytes: int, compute_bf16: bool) -> Precision:
    """The activations' precision from the module's weight bytes and whether the forward
    autocasts to bf16."""
    if module_bytes == 2:
        return "bf16"
    return "autocast" if compute_bf16 else "fp32"
