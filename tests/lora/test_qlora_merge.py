"""QLoRA's merged weights (what weight sync sends): each packed 4-bit base weight is
dequantized before its adapter delta is added, and bitsandbytes' quantization-state keys
are not sent (issue 21 §3.5; before, the delta was added to the packed bytes).

bitsandbytes needs a CUDA GPU and is not installed here, so the base layers are replaced by
a stand-in (`FourBitLinear`) that packs and unpacks as bitsandbytes' `Params4bit` does:
blockwise NF4 codes, two per byte in a `(numel / 2, 1)` uint8 tensor, an absmax per block,
the quantization state on the parameter (`.quant_state`), and the same extra state-dict
keys `Linear4bit` writes (`weight.absmax`, `weight.quant_map`,
`weight.quant_state.bitsandbytes__nf4`). A module named `bitsandbytes.functional` holding
the stand-in's `dequantize_4bit` takes the real one's place, so the code's own call runs."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass

import pytest
import torch
from torch import nn

pytest.importorskip("peft")

from alignflow.tasks.modeling import lora
from alignflow.tasks.modeling.loading import load_causal_lm

NF4 = torch.tensor([-1.0, -0.6962, -0.5251, -0.3949, -0.2844, -0.1848, -0.0911, 0.0,
                    0.0796, 0.1609, 0.2461, 0.3379, 0.4407, 0.5626, 0.7230, 1.0])
BLOCK = 64


@dataclass
class QuantState:
    absmax: torch.Tensor
    shape: torch.Size
    dtype: torch.dtype
    blocksize: int = BLOCK
    code: torch.Tensor = NF4
    quant_type: str = "nf4"


class Params4bit(nn.Parameter):
    """Packed codes as the parameter's data, its quantization state beside it."""

    def __new__(cls, data: torch.Tensor, quant_state: QuantState):
        self = super().__new__(cls, data, requires_grad=False)
        self.quant_state = quant_state
        return self


def quantize_4bit(w: torch.Tensor) -> tuple[torch.Tensor, QuantState]:
    blocks = w.float().reshape(-1, BLOCK)
    absmax = blocks.abs().amax(1)
    codes = (blocks / absmax[:, None]).reshape(-1, 1).sub(NF4).abs().argmin(1).to(torch.uint8)
    packed = (codes[0::2] << 4 | codes[1::2]).reshape(-1, 1)
    return packed, QuantState(absmax, w.shape, torch.bfloat16)


def dequantize_4bit(packed: torch.Tensor, quant_state: QuantState) -> torch.Tensor:
    flat = packed.reshape(-1)
    codes = torch.stack([flat >> 4, flat & 15], 1).reshape(-1).long()
    values = NF4[codes].reshape(-1, quant_state.blocksize) * quant_state.absmax[:, None]
    return values.reshape(quant_state.shape).to(quant_state.dtype)


class FourBitLinear(nn.Linear):
    """`bnb.nn.Linear4bit` as far as the merge sees it."""

    def __init__(self, linear: nn.Linear) -> None:
        super().__init__(linear.in_features, linear.out_features, bias=linear.bias is not None)
        self.weight = Params4bit(*quantize_4bit(linear.weight.data))

    def _save_to_state_dict(self, destination, prefix, keep_vars):
        super()._save_to_state_dict(destination, prefix, keep_vars)
        qs = self.weight.quant_state
        destination[prefix + "weight.absmax"] = qs.absmax
        destination[prefix + "weight.quant_map"] = qs.code
        destination[prefix + "weight.quant_state.bitsandbytes__nf4"] = torch.zeros(8,
                                                                                   dtype=torch.uint8)


@pytest.fixture
def bnb(monkeypatch):
    """Installs the stand-in `bitsandbytes` when called (after peft has wrapped the model:
    peft probes for the real package)."""
    return lambda: _install(monkeypatch)


def _install(monkeypatch) -> None:
    functional = types.ModuleType("bitsandbytes.functional")
    functional.dequantize_4bit = dequantize_4bit
    package = types.ModuleType("bitsandbytes")
    package.functional = functional
    monkeypatch.setitem(sys.modules, "bitsandbytes", package)
    monkeypatch.setitem(sys.modules, "bitsandbytes.functional", functional)


def _qlora(model_dir) -> tuple[nn.Module, dict[str, torch.Tensor]]:
    """A LoRA model on a 4-bit (stand-in) base with non-zero adapters, and the merge
    expected from the dequantized base."""
    torch.manual_seed(0)
    model = lora.wrap(load_causal_lm(model_dir), lora.LoraConfig(rank=4, alpha=8))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            p.data.normal_()
    plain = {k: v.clone() for k, v in lora.merged_state(model)}
    for name, module in list(model.named_modules()):
        if hasattr(module, "base_layer") and isinstance(module.base_layer, nn.Linear):
            module.base_layer = FourBitLinear(module.base_layer)
            key = lora._plain_name(f"{name}.base_layer.weight")
            w = module.base_layer.weight
            delta = plain[key].float() - _orig(model_dir, key)
            plain[key] = (dequantize_4bit(w.data, w.quant_state).float() + delta).to(
                torch.bfloat16)
    return model, plain


def _orig(model_dir, key: str) -> torch.Tensor:
    return load_causal_lm(model_dir).state_dict()[key].float()


def test_a_4bit_base_is_dequantized_before_the_merge_and_its_state_is_not_sent(
        tiny_model_dir, bnb):
    model, expected = _qlora(tiny_model_dir)
    bnb()
    packed = [k for k, v in model.state_dict().items() if v.dtype == torch.uint8]
    assert any(k.endswith("weight.absmax") for k in model.state_dict()) and packed
    merged = dict(lora.merged_state(model))
    assert set(merged) == set(expected)  # no quantization-state keys
    for name, tensor in merged.items():
        assert tensor.shape == expected[name].shape and tensor.dtype.is_floating_point, name
        torch.testing.assert_close(tensor.float(), expected[name].float(), atol=2e-2, rtol=0)
