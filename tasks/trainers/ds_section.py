"""The `ds` section: how the trainer backend runs a model (OpenRLHF 0.11's `--ds.*` keys).

Precision and sample packing apply to every trainer; ZeRO and the other DeepSpeed knobs
join here when the DeepSpeed trainer is selectable by config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import get_args

from alignflow.errors import require
from alignflow.tasks.modeling.device import ATTENTIONS, Attention
from alignflow.tasks.trainers.base import Precision


@dataclass(frozen=True, kw_only=True)
class DSConfig:
    """param_dtype: fp32, or bf16 (autocast forward, fp32 master weights)."""

    param_dtype: Precision = "fp32"
    packing_samples: bool = field(default=False, metadata={
        "help": "pack each micro-batch into one row (no padding); pays off with varlen "
                "attention kernels (GPU), not on CPU where the block mask costs full attention"})
    attn_implementation: Attention = field(default="sdpa", metadata={
        "help": "attention kernels of the HF models: sdpa, eager, or flash_attention_2 (GPU, "
                "needs flash-attn; OpenRLHF's default)"})
    enable_sleep: bool = field(default=False, metadata={
        "help": "move the trainer's weights and optimizer state off the GPU between learn "
                "steps (colocated with vLLM)"})

    def __post_init__(self) -> None:
        require(self.param_dtype in get_args(Precision), "param_dtype",
                f"one of {get_args(Precision)}", self.param_dtype)
        require(self.attn_implementation in ATTENTIONS, "attn_implementation",
                f"one of {ATTENTIONS}", self.attn_implementation)
