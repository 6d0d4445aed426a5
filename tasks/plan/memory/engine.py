"""A generation engine's bytes on one of its GPUs, and whether vLLM's KV cache has room.

vLLM takes `gpu_memory_utilization × the GPU's memory` for itself (weights, activations
and the KV cache: vLLM's `determine_available_memory`), and refuses to start where that
much is not free; its KV cache is what the share leaves after the weights, and holds
2 × layers × kv_heads × head_dim × dtype bytes per token (K and V of every layer; kv
heads split over tensor-parallel ranks). It needs room for one sequence of
`max_model_len` to start, and decodes at most as many sequences at once as fit
(`max_num_seqs` asked: the rest wait, preempted). With `vllm.kv_cache_gib` the share is
the weights and that cache. Asleep (`vllm.enable_sleep`) it frees the share.

A weight sync stages what it receives before one in-place reload (`tasks/engines/vllm/
worker.py`: the received buckets are kept until `alignflow_commit_weights`): the whole
model in the engine's dtype on every engine GPU, outside vLLM's share. OpenRLHF sends a
tensor at a time instead. The HF engine is the policy's copy in the host's process, plus
its KV cache for a micro-batch of prompts.
"""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.tasks.engines.vllm.config import VLLMEngineConfig
from alignflow.tasks.plan.memory import activations
from alignflow.tasks.plan.memory.shape import ModelShape
from alignflow.tasks.plan.memory.states import Items

DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2, "auto": 2}  # auto: a bf16 checkpoint


@dataclass(frozen=True)
class EngineBytes:
    """An engine's bytes on one GPU: always, while generating, while syncing; and its KV
    cache's room and cost per token (vLLM)."""

    resident: Items
    generate: Items
    sync: Items
    sleeps: bool
    kv_room: float = 0.0
    kv_per_token: float = 0.0
    max_num_seqs: int = 0

    def sequences(self, seq_len: int) -> float:
        """Sequences of `seq_len` tokens the KV cache holds at once."""
        return self.kv_room / (self.kv_per_token * seq_len) if self.kv_per_token else 0.0


def vllm(shape: ModelShape, cfg: VLLMEngineConfig, *, gpu_total: float,
         tensor_parallel: int, by_bucket: bool = True) -> EngineBytes:
    """A vLLM engine's rank on one GPU of `gpu_total` bytes."""
    dtype = dtype_bytes(cfg)
    weights = shape.params * dtype / tensor_parallel
    if cfg.kv_cache_bytes is not None:
        share, kv_room = weights + cfg.kv_cache_bytes, float(cfg.kv_cache_bytes)
        item = f"vLLM weights + KV cache ({cfg.section.kv_cache_gib:g} GiB)"
    else:
        share = cfg.gpu_memory_utilization * gpu_total
        kv_room = share - weights
        item = f"vLLM share ({cfg.gpu_memory_utilization:g} of the GPU)"
    # alignflow loads a sync bucket by bucket (`tasks/engines/vllm/engine_sync.py`): one
    # bucket and the largest tensor above the weights; OpenRLHF one tensor at a time
    largest = shape.largest_tensor * dtype
    staged = min(shape.params * dtype, cfg.sync_bucket_bytes + largest) if by_bucket \
        else largest
    return EngineBytes(resident={item: share}, generate={}, sleeps=cfg.enable_sleep_mode,
                       sync={"sync staging": staged}, kv_room=max(kv_room, 0.0),
                       kv_per_token=shape.kv_bytes_per_token(dtype, tensor_parallel),
                       max_num_seqs=cfg.section.max_num_seqs)


def dtype_bytes(cfg: VLLMEngineConfig) -> int:
    """Bytes a weight (and a KV entry) of the engine's dtype."""
    return DTYPE_BYTES.get(cfg.dtype, 2)


def hf(shape: ModelShape, *, weight_bytes: int, micro: int, seq_len: int) -> EngineBytes:
    """The HF engine: its copy of the policy, a micro-batch's KV cache and forward."""
    kv = shape.kv_bytes_per_token(weight_bytes) * micro * seq_len
    step = activations.forward(shape, tokens=micro * seq_len, logit_rows=micro,
                               precision="bf16" if weight_bytes == 2 else "fp32")
    return EngineBytes(resident={"HF engine weights": shape.params * weight_bytes},
                       generate={"HF engine KV cache": kv, **step}, sync={}, sleeps=False)


def engine_seq_len(shape: ModelShape, cfg: VLLMEngineConfig, run_len: int) -> int:
    """The longest sequence vLLM must hold to start: `vllm.max_model_len`, else the
    model's own (`max_position_embeddings`), else the run's."""
    return cfg.section.max_model_len or shape.max_positions or run_len
