"""The memory model's per-layer activation bytes against the tensors autograd really saves
in Hugging Face's Llama layers: counted on the CPU with `saved_tensors_hooks` (each storage
once, parameters left out), as the difference between 4 and 2 layers, so the embedding
and the final norm cancel. The formula's one approximation is SDPA's log-sum-exp (4 bytes
per head and token; kernels pad it), so it must agree within 1%."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from alignflow.tasks.plan.memory import activations  # noqa: E402
from alignflow.tasks.plan.memory.shape import shape_of_config  # noqa: E402

TOKENS, VOCAB = 64, 128
SHAPES = [dict(hidden_size=256, intermediate_size=704, num_attention_heads=4,
               num_key_value_heads=2),
          dict(hidden_size=384, intermediate_size=512, num_attention_heads=6,
               num_key_value_heads=6)]


@pytest.fixture(autouse=True)
def _torchs_own_linear(monkeypatch):
    """torch's linear, as a process that never loaded a ZeRO-3 model has it: DeepSpeed's
    `zero.Init` swaps `F.linear` for its memory-efficient one process-wide and for good
    (it saves no weight casts), so a test after a ZeRO-3 test would count otherwise."""
    monkeypatch.setattr(torch.nn.functional, "linear", torch._C._nn.linear)


def _saved(shape: dict, layers: int, precision: str, checkpointing: bool) -> int:
    cfg = transformers.LlamaConfig(**shape, num_hidden_layers=layers, vocab_size=VOCAB,
                                   max_position_embeddings=256, attn_implementation="sdpa")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg)
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    if checkpointing:
        model.activation_checkpointing_enable(
            activation_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    params = {p.untyped_storage().data_ptr() for p in model.parameters()}
    seen: dict[int, int] = {}

    def pack(t):
        storage = t.untyped_storage()
        if storage.data_ptr() not in params:
            seen[storage.data_ptr()] = storage.nbytes()
        return t

    ids = torch.randint(0, VOCAB, (1, TOKENS), generator=torch.Generator().manual_seed(0))
    autocast = torch.autocast("cpu", torch.bfloat16, enabled=precision == "autocast")
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), autocast:
        model.model(input_ids=ids, use_cache=False)  # the decoder: no LM head
    return sum(seen.values())


@pytest.mark.parametrize("precision", ["bf16", "autocast", "fp32"])
@pytest.mark.parametrize("shape", SHAPES, ids=["gqa", "mha"])
def test_per_layer_bytes_match_the_saved_tensors(shape, precision):
    per_layer = (_saved(shape, 4, precision, False) - _saved(shape, 2, precision, False)) / 2
    model = shape_of_config({**shape, "num_hidden_layers": 1, "vocab_size": VOCAB}, "t", "t")
    expected = TOKENS * activations.layer_bytes_per_token(model, precision)
    if precision == "autocast":  # the layer's bf16 weight casts (norm weights stay fp32)
        expected += 2 * (model.layer_params - 2 * model.hidden)
    assert per_layer == pytest.approx(expected, rel=0.01)


@pytest.mark.parametrize("precision, kept", [("bf16", 2), ("fp32", 4)])
def test_checkpointed_layers_keep_their_input(precision, kept):
    shape = SHAPES[0]
    per_layer = (_saved(shape, 4, precision, True) - _saved(shape, 2, precision, True)) / 2
    assert per_layer == TOKENS * shape["hidden_size"] * kept
