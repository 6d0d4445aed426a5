"""Bytes a trained role's weights, gradients and optimizer states hold on each GPU, as
alignflow's trainers hold them (`tasks/trainers/`), and a frozen model's weights.

Mixed-precision Adam keeps K = 12 bytes per trained parameter besides the weights and
gradients (fp32 master 4 + moments 4 + 4), which ZeRO stage 1 shards over the N ranks of
the data-parallel group, stage 2 with the gradients, stage 3 with the weights too
(Rajbhandari et al. 2020, "ZeRO", §5.1: (2 + 2 + K)Ψ → 2Ψ + 2Ψ + KΨ/N → 2Ψ + (2 + K)Ψ/N →
(2 + 2 + K)Ψ/N). Read from the code, beside the paper:

- torch trainer: fp32 weights, or (param_dtype bf16) a bf16 module with fp32 masters
  (`trainers/master_weights.py`); its gradients are the module's, freed after each step.
- DeepSpeed (0.19, `deepspeed/runtime/zero/`): a bf16 module under ZeRO (fp32 under stage
  0, autocast); the fp32 master partition is a copy at every stage, fp32 weights too
  (stage 3 compares a device with its name, never equal) — measured on the H100: 20 bytes a
  parameter held at ZeRO-3 fp32, 16 at ZeRO-2 (tests/fast/test_plan_memory_h100.py);
  stage 2 reduces into an fp32 gradient partition through a bucket of `reduce_bucket_size`
  elements; stage 3 keeps a gradient partition (in the module's dtype) and its bucket for
  the whole run, and gathers each module whole for its forward (DeepSpeed's 5e7-element
  prefetch bucket ahead of it). `adam_offload`: masters, moments and gradient partitions on
  the CPU (DeepSpeedCPUAdam).
- LoRA: the frozen base in the module's dtype (QLoRA: 4-bit NF4 linear weights, one fp32
  absmax per 64-weight block, 0.5625 bytes a weight), Adam over the adapters only.
"""

from __future__ import annotations

from alignflow.tasks.plan.hosts import TrainerPlan
from alignflow.tasks.plan.memory.shape import LINEARS, ModelShape

REDUCE_BUCKET = 500_000_000  # DeepSpeed's reduce_bucket_size (tasks/trainers/deepspeed/config.py)
PREFETCH_BUCKET = 50_000_000  # DeepSpeed's stage3_prefetch_bucket_size
NF4_BYTES = 0.5 + 4 / 64  # 4 bits a weight + an fp32 absmax per 64-weight block
Items = dict[str, float]


def trainable(shape: ModelShape, plan: TrainerPlan) -> int:
    lora = plan.ds.lora
    return shape.lora_params(lora.rank, lora.target_modules) if lora.enabled else shape.params


def module_bytes(plan: TrainerPlan) -> int:
    """Bytes a weight of the module: bf16 for the torch trainer's bf16 mode and DeepSpeed's
    under ZeRO; fp32 otherwise (DeepSpeed's stage 0 autocasts fp32 weights)."""
    bf16 = plan.config.dtype == "bf16"
    if plan.backend == "deepspeed":
        return 2 if bf16 and plan.ds.stage > 0 else 4
    return 2 if bf16 else 4


def weights(shape: ModelShape, plan: TrainerPlan) -> float:
    """The module's weights on one rank (ZeRO-3: its partition)."""
    mb, lora = module_bytes(plan), plan.ds.lora
    if plan.ds.load_in_4bit and lora.enabled:
        linear = shape.layers * sum(a * b for a, b in map(shape.linear, LINEARS))
        base = linear * NF4_BYTES + (shape.params - linear) * mb
    else:
        base = shape.params * mb
    base += trainable(shape, plan) * mb if lora.enabled else 0
    sharded = plan.backend == "deepspeed" and plan.ds.stage == 3
    return base / plan.world_size if sharded else base


def trainer_items(role: str, shape: ModelShape, plan: TrainerPlan,
                  bucket: int | None = None) -> tuple[Items, Items]:
    """(resident, learn-only) bytes of a trained role on one of its GPUs; `bucket`: ZeRO's
    reduce bucket in elements (None: DeepSpeed's 5e8 capped at the trainable parameters,
    as `trainers/deepspeed/config.model_buckets` sizes it)."""
    t, mb = trainable(shape, plan), module_bytes(plan)
    resident = {f"{role} weights": weights(shape, plan)}
    if plan.backend == "torch" or plan.ds.stage == 0:
        masters = 4 * t if mb == 2 else 0  # MasterWeights: fp32 copies of a bf16 module
        resident |= {f"{role} fp32 masters": masters, f"{role} optimizer states": 8 * t}
        return _nonzero(resident), {f"{role} gradients": mb * t}
    n, offload = plan.world_size, plan.ds.adam_offload
    gpu = 0 if offload else 1
    resident |= {f"{role} fp32 masters": gpu * 4 * t / n, f"{role} optimizer states": gpu * 8 * t / n}
    bucket = mb * (bucket or min(REDUCE_BUCKET, t)) * (2 if plan.ds.overlap_comm else 1)
    if plan.ds.stage == 3:
        resident[f"{role} gradients"] = gpu * mb * t / n + bucket
        return _nonzero(resident), {f"{role} ZeRO-3 gathers": gathered(shape, mb)}
    grads = gpu * 4 * t / n + (mb * t if plan.ds.stage == 1 else bucket)
    return _nonzero(resident), {f"{role} gradients": grads}


def gathered(shape: ModelShape, mb: int) -> float:
    """ZeRO-3's live gathered weights: the module being computed (the embedding or LM head
    is the largest, or a whole layer) and the prefetch bucket ahead of it."""
    largest = max(shape.vocab * shape.hidden, shape.layer_params)
    return mb * (largest + min(PREFETCH_BUCKET, shape.params))


def frozen_weights(shape: ModelShape, dtype_bytes: int, shards: int = 1) -> float:
    """A frozen model's weights on one GPU: a replica, or a ZeRO-3 shard of `shards`."""
    return shape.params * dtype_bytes / shards


def _nonzero(items: Items) -> Items:
    return {k: v for k, v in items.items() if v}
