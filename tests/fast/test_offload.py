"""Offloading a model to a temp file and back is bitwise, tied weights included."""

from __future__ import annotations

import torch

from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.modeling.offload import offload, reload


def test_offload_roundtrip_keeps_tied_weights(tiny_model_dir):
    model = load_causal_lm(str(tiny_model_dir))
    before = {k: v.clone() for k, v in model.state_dict().items()}
    ids = torch.tensor([[5, 6, 7, 8]])
    logits = model(input_ids=ids).logits
    for _ in range(3):  # garbage in freshly allocated memory would show on some round
        path = offload(model)
        assert next(model.parameters()).device.type == "meta"
        reload(model, path)
    after = model.state_dict()
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert torch.equal(model(input_ids=ids).logits, logits)
