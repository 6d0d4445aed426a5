"""The `ds` section: how the trainer backend runs a model (OpenRLHF 0.11's `--ds.*` keys).

Precision and sample packing apply to every trainer. The trainer is the plain PyTorch one
unless DeepSpeed is asked for: `ds.trainer=deepspeed`, or any `ds.zero_stage` (as OpenRLHF
users expect from `--zero_stage`). `ds.lora.*` (with `ds.load_in_4bit`) trains LoRA
adapters on a frozen base under either trainer. DeepSpeed knobs alignflow cannot honour
yet are refused in one line saying why (`UNAVAILABLE`: flip an entry when it lands).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from alignflow.errors import invalid, require
from alignflow.tasks.modeling.attention import ATTENTIONS, Attention
from alignflow.tasks.modeling.lora_config import LoraConfig
from alignflow.tasks.trainers.config import Precision

TrainerChoice = Literal["auto", "torch", "deepspeed"]
AccumDtype = Literal["fp32", "bf16", "fp16"]

# key -> (the only value alignflow accepts now, why another one is refused)
UNAVAILABLE: dict[str, tuple[Any, str]] = {
    "deepcompile": (False, "DeepSpeed's compiler is not wired into alignflow's trainer"),
    "tensor_parallel_size": (1, "DeepSpeed AutoTP training is not wired into alignflow; "
                             "use ZeRO-3 to shard the model"),
    "ring_attn_size": (1, "ring attention needs flash-attention varlen kernels (GPU) and is "
                       "not wired into alignflow"),
    "ring_attn_head_stride": (1, "ring attention is not wired into alignflow"),
    "use_universal_ckpt": (False, "alignflow checkpoints are its own safetensors format; a "
                           "different world size resumes only from the weights "
                           "(DeepSpeedTrainer.restore(optimizer=False))"),
    "zpg": (1, "ZeRO++ hierarchical partitioning needs ZeRO-3 over several GPU nodes and is "
            "not wired into alignflow"),
}


@dataclass(frozen=True, kw_only=True)
class DSConfig:
    """The training backend.

    param_dtype: fp32, or bf16 (bf16 weights, fp32 master weights in the optimizer)
    trainer: auto (DeepSpeed when zero_stage is set, else PyTorch), torch or deepspeed
    zero_stage: DeepSpeed ZeRO stage: 0 data parallel only, 1 + optimizer state sharded, 2 + gradients, 3 + parameters (null: PyTorch trainer; with trainer=deepspeed: 2)
    adam_offload: keep Adam states on the CPU and step them with DeepSpeedCPUAdam (ZeRO >= 1)
    overlap_comm: overlap gradient reduction with backward (DeepSpeed ZeRO 2/3)
    grad_accum_dtype: dtype gradients accumulate in; alignflow keeps fp32 weights and gradients (null = fp32)
    load_in_4bit: QLoRA: the frozen base in 4-bit NF4 (needs ds.lora.rank, a CUDA GPU and bitsandbytes)
    deepcompile: not available (DeepSpeed's compiler)
    tensor_parallel_size: not available (> 1: DeepSpeed AutoTP)
    ring_attn_size: not available (> 1: ring attention)
    ring_attn_head_stride: not available (ring attention)
    use_universal_ckpt: not available (DeepSpeed universal checkpoints)
    enable_sleep: move the trainer's weights and optimizer state (every ZeRO state) off the GPU between learn steps
    zpg: not available (> 1: ZeRO++ hierarchical partitions)
    """

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
    trainer: TrainerChoice = "auto"
    zero_stage: int | None = None
    adam_offload: bool = False
    overlap_comm: bool = False
    grad_accum_dtype: AccumDtype | None = None
    load_in_4bit: bool = False
    lora: LoraConfig = field(default_factory=LoraConfig)
    deepcompile: bool = False
    tensor_parallel_size: int = 1
    ring_attn_size: int = 1
    ring_attn_head_stride: int = 1
    use_universal_ckpt: bool = False
    zpg: int = 1

    def __post_init__(self) -> None:
        require(self.param_dtype in get_args(Precision), "param_dtype",
                f"one of {get_args(Precision)}", self.param_dtype)
        require(self.attn_implementation in ATTENTIONS, "attn_implementation",
                f"one of {ATTENTIONS}", self.attn_implementation)
        require(self.trainer in get_args(TrainerChoice), "trainer",
                f"one of {get_args(TrainerChoice)}", self.trainer)
        if self.zero_stage is not None:
            require(self.zero_stage in (0, 1, 2, 3), "zero_stage", "0, 1, 2, 3 or null",
                    self.zero_stage)
        require(not (self.trainer == "torch" and self.zero_stage is not None), "zero_stage",
                "null with trainer=torch (a ZeRO stage selects the DeepSpeed trainer)",
                self.zero_stage)
        self._check_deepspeed_only()
        require(self.grad_accum_dtype in (None, "fp32"), "grad_accum_dtype",
                "fp32 or null (alignflow keeps fp32 master weights and gradients; bf16 is an "
                "autocast of the forward)", self.grad_accum_dtype)
        require(not self.load_in_4bit or self.lora.enabled, "load_in_4bit",
                "false unless ds.lora.rank > 0 (QLoRA trains adapters on the 4-bit base)",
                self.load_in_4bit)
        for key, (allowed, why) in UNAVAILABLE.items():
            if getattr(self, key) != allowed:
                raise invalid(key, f"not available: {why}; expected {allowed!r}, got "
                                   f"{getattr(self, key)!r}")

    def _check_deepspeed_only(self) -> None:
        if self.uses_deepspeed:
            require(not (self.adam_offload and self.stage == 0), "adam_offload",
                    "false with zero_stage=0 (DeepSpeed offloads optimizer state only under "
                    "ZeRO >= 1)", self.adam_offload)
            return
        for key in ("adam_offload", "overlap_comm"):
            require(not getattr(self, key), key, "false without DeepSpeed (set ds.zero_stage "
                    "or ds.trainer=deepspeed)", getattr(self, key))

    @property
    def uses_deepspeed(self) -> bool:
        """DeepSpeed when asked by name, or by a ZeRO stage (auto)."""
        return self.trainer == "deepspeed" or (self.trainer == "auto"
                                               and self.zero_stage is not None)

    @property
    def stage(self) -> int:
        """The ZeRO stage DeepSpeed runs (2, OpenRLHF's default, when none is given)."""
        return 2 if self.zero_stage is None else self.zero_stage
