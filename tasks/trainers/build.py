"""The one place a trainer is chosen: PyTorch or DeepSpeed by the `ds` section, and the
model it trains: the causal LM as loaded, or LoRA adapters on the frozen (4-bit) base.

Hosts call `trainable_lm` then `build_trainer`; no step branches on the backend, every
step talks to `trainers.base.Trainer`.
"""

from __future__ import annotations

import torch
from torch import nn

from alignflow.tasks.modeling import lora
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.trainers.base import Trainer, TrainerConfig
from alignflow.tasks.trainers.ds_section import DSConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer

LORA_INIT_SEED = 0  # adapters start the same in every process and every run


def build_trainer(model: nn.Module, cfg: TrainerConfig, ds: DSConfig | None = None) -> Trainer:
    """`TorchTrainer`, or `DeepSpeedTrainer` when `ds` asks for DeepSpeed (imported only then)."""
    ds = ds or DSConfig()
    if not ds.uses_deepspeed:
        return TorchTrainer(model, cfg)
    from alignflow.tasks.trainers.deepspeed_trainer import DeepSpeedTrainer

    overrides = {}
    if ds.stage == 3:  # shard every tensor (DeepSpeed keeps small ones whole by default)
        overrides = {"zero_optimization": {"stage3_param_persistence_threshold": 0}}
    return DeepSpeedTrainer(model, cfg, ds, overrides=overrides)


def trainable_lm(path: str, ds: DSConfig | None = None, *,
                 attn_implementation: str = "sdpa") -> nn.Module:
    """The causal LM at `path` (fp32 weights), wrapped with LoRA adapters when
    `ds.lora.rank > 0`: the base frozen (in 4-bit NF4 with `ds.load_in_4bit`), the adapters
    initialised from a fixed seed so every rank and every resumed process agrees."""
    ds = ds or DSConfig()
    if not ds.lora.enabled:
        return load_causal_lm(path, dtype="fp32", attn_implementation=attn_implementation)
    base = lora.load_base(path, load_in_4bit=ds.load_in_4bit)
    with torch.random.fork_rng():
        torch.manual_seed(LORA_INIT_SEED)
        return lora.wrap(base, ds.lora)
