"""vLLM's settings: the `vllm` config section (OpenRLHF 0.11's `vllm.*` keys, each declared
and checked here once) and what one engine is built from (`VLLMEngineConfig`: the section
resolved for where the engine runs). No vLLM import here.

`enable_prefix_caching` is off by default, as OpenRLHF's flag and as the flows are tested
(bitwise resume with vLLM, `tests/vllm/test_vllm_flows.py`); the engine tests turn it on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal, get_args

from alignflow.errors import ConfigError, require

SyncBackend = Literal["nccl", "gloo"]
Transport = Literal["ray", "nccl", "gloo"]  # how weights reach engines in actors
VLLM_DTYPES = {"fp32": "float32", "bf16": "bfloat16"}
COLOCATED_GPU_SHARE = 0.4  # an engine inside the trainer's process leaves it the rest
OWN_GPU_SHARE = 0.95  # an engine on GPUs of its own
CPU_KV_CACHE_BYTES = 1 << 30  # vLLM's CPU default asks for 92% of RAM up front; 1 GiB suffices
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256)  # vLLM's CPU attention
MIN_HEAD_SIZE = 32  # below it no vLLM attention backend serves a model


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
        "help": "an engine that makes no progress (no new token, no finished sequence) "
                "for this long in a generate, or takes longer for a sync bucket, sleep or "
                "wake, is hung: restarted and the call retried; a long generate that keeps "
                "producing is never cut (alignflow)"})
    startup_timeout_s: float = field(default=900.0, metadata={
        "help": "seconds engines in Ray actors may take to get their CPUs/GPUs and load "
                "the model; what is waited for is said every 10 s (alignflow)"})

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
        require(math.isfinite(self.startup_timeout_s) and self.startup_timeout_s > 0,
                "startup_timeout_s", "a float > 0", self.startup_timeout_s)

    @property
    def engines(self) -> int:
        return max(self.num_engines, 1)

    def transport(self, *, on_gpu: bool) -> Transport:
        """How weights reach separate engines (`sync_with_ray`, `sync_backend`); CPU builds
        have no NCCL, so gloo there."""
        if self.sync_with_ray:
            return "ray"
        return self.sync_backend if on_gpu else "gloo"

    def engine_config(self, *, dtype: str, on_gpu: bool, colocated: bool) -> VLLMEngineConfig:
        """The engine's settings where it runs: `dtype` is the trainer's (fp32 | bf16)."""
        return VLLMEngineConfig(section=self, dtype=VLLM_DTYPES.get(dtype, dtype),
                                on_gpu=on_gpu, colocated=colocated)


@dataclass(frozen=True, kw_only=True)
class VLLMEngineConfig:
    """One engine's settings: the `vllm` section resolved for where the engine runs.

    dtype: vLLM's model dtype ("auto" = the checkpoint's; tests use "float32").
    on_gpu: the engine runs on GPUs (CPU builds: always eager, no sleep mode).
    colocated: the engine shares the trainer's process and leaves it most of the GPU.
    sleep_level: 1 = weights offloaded to host memory, 2 = weights discarded (resync after).
    sync_bucket_bytes: size of the packed buffers a weight sync sends.
    """

    section: VLLMSection = field(default_factory=VLLMSection)
    dtype: str = "auto"
    on_gpu: bool = False
    colocated: bool = False
    sleep_level: Literal[1, 2] = 1
    sync_bucket_bytes: int = 128 << 20

    def __post_init__(self) -> None:
        if self.sleep_level not in (1, 2):
            raise ConfigError(f"VLLMEngineConfig.sleep_level={self.sleep_level!r}: expected 1 or 2")
        if self.sync_bucket_bytes < 1 << 20:
            raise ConfigError(f"VLLMEngineConfig.sync_bucket_bytes={self.sync_bucket_bytes!r}: "
                              "expected an integer >= 1 MiB")

    @property
    def tensor_parallel_size(self) -> int:
        return self.section.tensor_parallel_size

    @property
    def gpu_memory_utilization(self) -> float:
        """As set, else what an engine in the trainer's process or on its own GPUs takes."""
        share = self.section.gpu_memory_utilization
        if share is not None:
            return share
        return COLOCATED_GPU_SHARE if self.colocated else OWN_GPU_SHARE

    @property
    def kv_cache_bytes(self) -> int | None:
        gib = self.section.kv_cache_gib
        return None if gib is None else int(gib * (1 << 30))

    @property
    def enforce_eager(self) -> bool:
        return self.section.enforce_eager or not self.on_gpu

    @property
    def enable_sleep_mode(self) -> bool:
        return self.section.enable_sleep and self.on_gpu

    @property
    def generate_timeout_s(self) -> float:
        return self.section.generate_timeout_s

    @property
    def startup_timeout_s(self) -> float:
        return self.section.startup_timeout_s

    def llm_kwargs(self, model_path: str, *, on_gpu: bool, isolated: bool = False) -> dict:
        """Keyword arguments for `vllm.LLM` (the engine adds none of its own beyond these).
        `isolated`: the worker must not share this process (which is a rank of a trainer's
        group: vLLM would adopt that group as its world), so it runs as a process of its
        own (`mp`) even without tensor parallelism."""
        kv_bytes = self.kv_cache_bytes
        if kv_bytes is None and not on_gpu:
            kv_bytes = CPU_KV_CACHE_BYTES
        s = self.section
        in_process = s.tensor_parallel_size == 1 and not isolated
        return dict(
            model=model_path, tokenizer=model_path, dtype=self.dtype, seed=0,
            tensor_parallel_size=s.tensor_parallel_size,
            distributed_executor_backend="uni" if in_process else "mp",
            gpu_memory_utilization=self.gpu_memory_utilization, kv_cache_memory_bytes=kv_bytes,
            max_model_len=s.max_model_len, max_num_seqs=s.max_num_seqs,
            enable_prefix_caching=s.enable_prefix_caching,
            enforce_eager=self.enforce_eager or not on_gpu,  # a CPU build under fake GPUs too
            enable_sleep_mode=self.enable_sleep_mode and on_gpu,
            logprobs_mode="processed_logprobs", disable_log_stats=True,
            # a prompt split over steps makes vLLM rewind the request's generator, which CPU
            # generators cannot do ("CPU Generator does not use offset"): whole prompts only
            enable_chunked_prefill=None if on_gpu else False,
            worker_extension_cls="alignflow.tasks.engines.vllm.worker.AlignflowWorkerExtension",
        )
