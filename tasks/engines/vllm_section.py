"""The `vllm` config section (OpenRLHF 0.11's `vllm.*` keys) and what an engine is built from.

A flow's config holds the section; the host turns it into a `VLLMEngineConfig` once it
knows where it runs (GPU or CPU, the trainer's dtype). No vLLM import here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from alignflow.errors import require
from alignflow.tasks.engines.vllm_config import VLLMEngineConfig

SyncBackend = Literal["nccl", "gloo"]
VLLM_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
COLOCATED_GPU_SHARE = 0.4  # an engine inside the trainer's process leaves it the rest


@dataclass(frozen=True, kw_only=True)
class VLLMSection:
    """vLLM generation engines; used when `rollout.engine` is vllm (or auto picks it).

    num_engines: engines generating in parallel, each a Ray actor (0: one engine; with
      rollout.engine=auto, a number > 0 also asks for vLLM where it is installed)
    tensor_parallel_size: GPUs per engine (tensor parallel inside the engine)
    gpu_memory_utilization: share of its GPU memory an engine may take (null: 0.95 on GPUs
      of its own, 0.4 inside the trainer's process)
    enable_prefix_caching: reuse a prompt's KV cache across its samples (reset after each sync)
    enforce_eager: no CUDA graphs (faster start, slower decode; always on for CPU builds)
    enable_sleep: free the engine's GPU memory between generate phases (colocated engines)
    sync_backend: process group of the weight broadcast to engines on their own GPUs
      (nccl; gloo on CPU builds, which have no NCCL)
    sync_with_ray: send weights to separate engines through Ray's object store instead of
      a broadcast group
    """

    num_engines: int = 0
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float | None = None
    enable_prefix_caching: bool = False
    enforce_eager: bool = False
    enable_sleep: bool = False
    sync_backend: SyncBackend = "nccl"
    sync_with_ray: bool = False
    max_num_seqs: int = field(default=256, metadata={
        "help": "sequences an engine decodes together in one step (alignflow)"})
    kv_cache_gib: float | None = field(default=None, metadata={
        "help": "KV cache per engine in GiB (alignflow; null: vLLM's choice on GPU, 1 on CPU)"})
    max_model_len: int | None = field(default=None, metadata={
        "help": "longest prompt + response an engine serves (alignflow; null: the model's)"})
    generate_timeout_s: float = field(default=600.0, metadata={
        "help": "a generate or sync call longer than this is a hung engine: it is "
                "restarted and the call retried (alignflow)"})

    def __post_init__(self) -> None:
        require(self.num_engines >= 0, "num_engines", "an integer >= 0", self.num_engines)
        require(self.tensor_parallel_size >= 1, "tensor_parallel_size", "an integer >= 1",
                self.tensor_parallel_size)
        if self.gpu_memory_utilization is not None:
            require(0.0 < self.gpu_memory_utilization <= 1.0, "gpu_memory_utilization",
                    "a float in (0, 1] or null", self.gpu_memory_utilization)
        require(self.sync_backend in get_args(SyncBackend), "sync_backend",
                f"one of {get_args(SyncBackend)}", self.sync_backend)
        require(self.max_num_seqs >= 1, "max_num_seqs", "an integer >= 1", self.max_num_seqs)
        if self.kv_cache_gib is not None:
            require(math.isfinite(self.kv_cache_gib) and self.kv_cache_gib > 0, "kv_cache_gib",
                    "a float > 0 or null", self.kv_cache_gib)
        if self.max_model_len is not None:
            require(self.max_model_len >= 2, "max_model_len", "an integer >= 2 or null",
                    self.max_model_len)
        require(math.isfinite(self.generate_timeout_s) and self.generate_timeout_s > 0,
                "generate_timeout_s", "a float > 0", self.generate_timeout_s)

    @property
    def engines(self) -> int:
        return max(self.num_engines, 1)

    def engine_config(self, *, dtype: str, on_gpu: bool, colocated: bool) -> VLLMEngineConfig:
        """The engine's settings where it runs: `dtype` is the trainer's (fp32 | bf16)."""
        share = self.gpu_memory_utilization
        if share is None:
            share = COLOCATED_GPU_SHARE if colocated else 0.95
        kv = None if self.kv_cache_gib is None else int(self.kv_cache_gib * (1 << 30))
        return VLLMEngineConfig(
            dtype=VLLM_DTYPES.get(dtype, dtype), tensor_parallel_size=self.tensor_parallel_size,
            gpu_memory_utilization=share, kv_cache_bytes=kv, max_model_len=self.max_model_len,
            max_num_seqs=self.max_num_seqs, enable_prefix_caching=self.enable_prefix_caching,
            enforce_eager=self.enforce_eager or not on_gpu,
            enable_sleep_mode=self.enable_sleep and on_gpu,
            generate_timeout_s=self.generate_timeout_s)
