"""The one place a trainer is chosen: PyTorch or DeepSpeed by the `ds` section, and the
model it trains: the causal LM as loaded, or LoRA adapters on the frozen (4-bit) base.

Hosts call `load_trainer(load, ...)` (or `trainable_lm` then `build_trainer`); no step
branches on the backend, every step talks to `trainers.base.Trainer`. Under ZeRO-3 the
model is loaded partitioned (`deepspeed.zero.Init`, through transformers' ZeRO-3 loading):
no rank ever holds the whole fp32 model, as OpenRLHF loads it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator

import torch
from torch import nn

from alignflow.tasks.modeling import lora
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.trainers.base import Trainer, TrainerConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer

LORA_INIT_SEED = 0  # adapters start the same in every process and every run


def build_trainer(model: nn.Module, cfg: TrainerConfig, ds: DSConfig | None = None) -> Trainer:
    """`TorchTrainer`, or `DeepSpeedTrainer` when `ds` asks for DeepSpeed (imported only then)."""
    ds = ds or DSConfig()
    if not ds.uses_deepspeed:
        return TorchTrainer(model, cfg)
    from alignflow.tasks.trainers.deepspeed.trainer import DeepSpeedTrainer

    return DeepSpeedTrainer(model, cfg, ds, overrides=deepspeed_overrides(ds))


def deepspeed_overrides(ds: DSConfig) -> dict:
    """DeepSpeed knobs alignflow sets beyond the `ds` section."""
    if ds.stage == 3:  # shard every tensor (DeepSpeed keeps small ones whole by default)
        return {"zero_optimization": {"stage3_param_persistence_threshold": 0}}
    return {}


def load_trainer(load: Callable[[], nn.Module], cfg: TrainerConfig, ds: DSConfig,
                 device: torch.device | None = None) -> Trainer:
    """The trainer of the model `load()` builds. Under ZeRO-3 `load` runs inside
    `deepspeed.zero.Init` (each parameter partitioned as it is made, on this rank's GPU);
    otherwise the model is loaded whole and moved to `device` (None: left where it is)."""
    with zero3_loading(cfg, ds) as partitioned:
        model = load()
    if not partitioned and device is not None:
        model = model.to(device)
    return build_trainer(model, cfg, ds)


@contextlib.contextmanager
def zero3_loading(cfg: TrainerConfig, ds: DSConfig) -> Iterator[bool]:
    """Models loaded inside are built partitioned where `ds` is ZeRO-3 (yields whether):
    transformers' `from_pretrained` builds under `deepspeed.zero.Init` and loads each
    module's weights into its partitions while an `HfDeepSpeedConfig` is alive, and only
    then (other models of the process load whole)."""
    if not (ds.uses_deepspeed and ds.stage == 3):
        yield False
        return
    from transformers.integrations import HfDeepSpeedConfig
    from transformers.integrations.deepspeed import unset_hf_deepspeed_config

    from alignflow.tasks.trainers.deepspeed.config import ds_config
    from alignflow.tasks.trainers.deepspeed.trainer import join_deepspeed

    join_deepspeed()  # zero.Init partitions over the rank's group
    alive = HfDeepSpeedConfig(ds_config(cfg, ds, pin_memory=torch.cuda.is_available(),
                                        overrides=deepspeed_overrides(ds)))
    try:
        yield True
    finally:
        unset_hf_deepspeed_config()
        del alive


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
