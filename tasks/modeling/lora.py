"""LoRA / QLoRA adapters (peft) on a causal LM: wrap, reference without a copy, merged weights.

- `wrap(model, cfg)` freezes the base and adds adapters on `target_modules` (peft's
  "all-linear" = every linear layer but the output head); only adapter tensors train.
- `adapter_disabled(model)`: inside it the model *is* the base model, so the reference
  policy needs no second copy in memory.
- `adapter_state` / `load_adapter_state`: the adapter tensors only (what checkpoints hold).
- `merged_state(model[, state])`: base weights + scaled B·A under plain HF names, computed
  beside the training weights (never merged in place, so training stays bitwise
  reproducible), also from a state gathered out of ZeRO-3 shards: what weight sync sends and
  `save_merged` writes as a plain HF folder.
- `load_in_4bit` (QLoRA) loads the base in 4-bit NF4 through bitsandbytes; it needs a CUDA
  GPU and bitsandbytes, and says so in one line otherwise.
"""

from __future__ import annotations

import contextlib
import importlib.util
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import torch
from torch import nn

from alignflow.errors import ConfigError
from alignflow.tasks.modeling.lora_config import LoraConfig as LoraConfig  # re-exported

PEFT_PREFIX = "base_model.model."


def _peft():
    try:
        import peft
    except ImportError:
        raise ConfigError("lora_rank is set but peft is not installed; expected "
                          "`pip install 'alignflow[lora]'`") from None
    return peft


def check_4bit() -> None:
    """One-line ConfigError unless bitsandbytes and a CUDA GPU are both present."""
    if not torch.cuda.is_available():
        raise ConfigError("load_in_4bit=True needs a CUDA GPU (bitsandbytes 4-bit kernels); "
                          "none is visible: drop load_in_4bit to train LoRA in full precision")
    if importlib.util.find_spec("bitsandbytes") is None:
        raise ConfigError("load_in_4bit=True needs bitsandbytes; expected "
                          "`pip install bitsandbytes` on the GPU machine")


def load_base(path: str, *, load_in_4bit: bool = False,
              dtype: torch.dtype = torch.float32) -> nn.Module:
    """The frozen base model from a local HF folder: plain, or 4-bit NF4 for QLoRA."""
    from transformers import AutoModelForCausalLM

    if not load_in_4bit:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True)
    check_4bit()
    from transformers import BitsAndBytesConfig

    quant = BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                               bnb_4bit_compute_dtype=torch.bfloat16,
                               bnb_4bit_use_double_quant=True)
    model = AutoModelForCausalLM.from_pretrained(path, quantization_config=quant,
                                                 dtype=torch.bfloat16, local_files_only=True)
    return _peft().prepare_model_for_kbit_training(model)


def wrap(model: nn.Module, cfg: LoraConfig) -> nn.Module:
    """A peft model whose only trainable tensors are the adapters (initialised from the
    global torch RNG: seed before calling for reproducible adapters)."""
    if not cfg.enabled:
        raise ConfigError(f"LoRA adapters with lora_rank={cfg.rank}: expected an integer >= 1 "
                          "(ds.lora.rank; 0 trains the full model)")
    peft = _peft()
    targets = cfg.target_modules
    target = targets[0] if targets == ("all-linear",) else list(targets)
    config = peft.LoraConfig(r=cfg.rank, lora_alpha=cfg.alpha, lora_dropout=cfg.dropout,
                             target_modules=target, task_type="CAUSAL_LM")
    try:
        return peft.get_peft_model(model, config)
    except ValueError as exc:
        raise ConfigError(f"LoraConfig.target_modules={list(targets)}: {exc}".split("\n")[0]
                          ) from None


def is_lora(model: nn.Module) -> bool:
    return hasattr(model, "peft_config")


@contextlib.contextmanager
def adapter_disabled(model: nn.Module) -> Iterator[nn.Module]:
    """The base model (adapters bypassed) for the duration: the reference policy, no copy."""
    with model.disable_adapter():
        yield model


def adapter_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapter tensors only, under peft's names (what an adapter checkpoint holds)."""
    return {k: v.detach() for k, v in _peft().get_peft_model_state_dict(model).items()}


def load_adapter_state(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """Copies adapter tensors saved by `adapter_state` into `model`; all must match."""
    try:
        result = _peft().set_peft_model_state_dict(model, state)
    except RuntimeError as exc:  # a shape mismatch: another rank or base model
        raise ConfigError("adapter checkpoint does not fit this model (" +
                          str(exc).strip().splitlines()[-1].strip() + "); expected the same "
                          "base model, lora_rank and target_modules") from None
    missing = [k for k in result.missing_keys if "lora_" in k]
    if missing or result.unexpected_keys:
        first = (missing or result.unexpected_keys)[0]
        raise ConfigError(f"adapter checkpoint does not fit this model ({first!r}); expected "
                          "the same base model, lora_rank and target_modules")


def _plain_name(peft_name: str) -> str:
    return peft_name.removeprefix(PEFT_PREFIX).replace(".base_layer.", ".")


def merged_state(model: nn.Module,
                 state: Mapping[str, torch.Tensor] | Iterable[tuple[str, torch.Tensor]]
                 | None = None, *, adapters: Mapping[str, torch.Tensor] | None = None
                 ) -> Iterator[tuple[str, torch.Tensor]]:
    """(HF name, tensor) of the base model with every active adapter folded in:
    W + scaling · B·A for adapted weights (new tensors), the rest as they are.

    Computed from `state` (peft names; default `model.state_dict()`), so it works on weights
    gathered from ZeRO-3 shards too (`DeepSpeedTrainer.state_dict_for_sync()`), also
    streamed: `state` may be an iterator of (name, tensor) when `adapters` holds the
    adapter tensors. The training weights are never merged in place, so training stays
    bitwise reproducible.
    A QLoRA base holds bitsandbytes' packed 4-bit weights (two values a byte) and their
    quantization state under extra keys (`weight.absmax`, `weight.quant_map`, ...): each
    such weight is dequantized first (full shape, the compute dtype), the delta added in
    fp32, and the quantization-state keys are not sent.
    """
    state = model.state_dict() if state is None else state
    items = state.items() if isinstance(state, Mapping) else state
    deltas = _deltas(model, state if adapters is None else adapters)
    packed = _four_bit(model)
    for name, tensor in items:
        if "lora_" in name or _quant_state_key(name, packed):
            continue
        base = tensor.detach()
        if name in packed:
            base = dequantize_4bit(base, packed[name])
            if name in deltas:
                base = (base.float() + deltas[name]).to(base.dtype)
        elif name in deltas:
            base = base + deltas[name].to(base.dtype)
        yield _plain_name(name), base


def _deltas(model: nn.Module, state: Mapping[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """peft name of each adapted base weight -> Σ scaling · B·A over its active adapters."""
    deltas: dict[str, torch.Tensor] = {}
    for name, module in model.named_modules():
        if not (hasattr(module, "lora_A") and hasattr(module, "base_layer")):
            continue
        for adapter in module.active_adapters:
            if adapter not in module.lora_A:
                continue
            a = state[f"{name}.lora_A.{adapter}.weight"].float()
            b = state[f"{name}.lora_B.{adapter}.weight"].float()
            delta = (b @ a) * module.scaling[adapter]
            delta = delta.T if getattr(module, "fan_in_fan_out", False) else delta
            key = f"{name}.base_layer.weight"
            deltas[key] = deltas[key] + delta if key in deltas else delta
    return deltas


def _four_bit(model: nn.Module) -> dict[str, Any]:
    """Parameter name -> quantization state of each packed 4-bit weight (bitsandbytes'
    `Params4bit` carries it as `.quant_state`)."""
    return {name: p.quant_state for name, p in model.named_parameters()
            if getattr(p, "quant_state", None) is not None}


def _quant_state_key(name: str, packed: dict[str, Any]) -> bool:
    """A key bitsandbytes adds beside a packed weight (`<weight>.absmax`, ...)."""
    return any(name.startswith(f"{weight}.") for weight in packed)


def dequantize_4bit(packed: torch.Tensor, quant_state: Any) -> torch.Tensor:
    """The full-precision weight (its original shape, the compute dtype) of a packed one."""
    from bitsandbytes.functional import dequantize_4bit as dequantize

    return dequantize(packed, quant_state)


def save_merged(model: nn.Module, folder: str, tokenizer: Any = None, *,
                state: dict[str, torch.Tensor] | None = None) -> None:
    """A plain HF folder (safetensors) of the merged weights: loads without peft."""
    state = dict(merged_state(model, state))
    base = model.get_base_model()
    base.save_pretrained(folder, state_dict=state)
    if tokenizer is not None:
        tokenizer.save_pretrained(folder)
