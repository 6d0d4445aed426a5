"""Settings of the vLLM generation engine (one frozen section; no vLLM import here).

OpenRLHF's flags map onto it in phase 2 (`--vllm_tensor_parallel_size`,
`--vllm_gpu_memory_utilization`, `--enable_prefix_caching`, `--enforce_eager`,
`--vllm_enable_sleep`); `num_engines` belongs to the Ray wrapper (`vllm_actor`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from alignflow.errors import ConfigError

CPU_KV_CACHE_BYTES = 1 << 30  # vLLM's CPU default asks for 92% of RAM up front; 1 GiB suffices


@dataclass(frozen=True, kw_only=True)
class VLLMEngineConfig:
    """dtype: model dtype for vLLM ("auto" = the checkpoint's; tests use "float32").
    tensor_parallel_size: GPUs per engine (a GPU setting; on CPU only 1 is tested).
    gpu_memory_utilization: fraction of GPU memory vLLM may take (weights + KV cache).
    kv_cache_bytes: KV cache size; None = vLLM's choice on GPU, 1 GiB on CPU.
    max_model_len: longest prompt + response; None = the model's maximum.
    max_num_seqs: sequences decoded together in one step.
    enable_prefix_caching: reuse a prompt's KV blocks across its n samples.
    enforce_eager: no CUDA graphs / torch.compile (faster start, slower decode on GPU).
    enable_sleep_mode: allow `sleep()` / `wake()` (GPU builds only).
    sleep_level: 1 = weights offloaded to host memory, 2 = weights discarded (resync after).
    sync_bucket_bytes: size of the packed buffers a weight sync sends.
    generate_timeout_s: a generate call longer than this is a hung engine (the Ray
      wrapper kills and restarts it; an engine in the caller's process cannot be stopped).
    """

    dtype: str = "auto"
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.9
    kv_cache_bytes: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int = 256
    enable_prefix_caching: bool = True
    enforce_eager: bool = True
    enable_sleep_mode: bool = False
    sleep_level: Literal[1, 2] = 1
    sync_bucket_bytes: int = 128 << 20
    generate_timeout_s: float = 600.0

    def __post_init__(self) -> None:
        checks = [
            (self.tensor_parallel_size >= 1, "tensor_parallel_size", "an integer >= 1"),
            (0.0 < self.gpu_memory_utilization <= 1.0, "gpu_memory_utilization",
             "a float in (0, 1]"),
            (self.kv_cache_bytes is None or self.kv_cache_bytes > 0, "kv_cache_bytes",
             "null or an integer > 0"),
            (self.max_num_seqs >= 1, "max_num_seqs", "an integer >= 1"),
            (self.sleep_level in (1, 2), "sleep_level", "1 or 2"),
            (self.sync_bucket_bytes >= 1 << 20, "sync_bucket_bytes", "an integer >= 1 MiB"),
            (self.generate_timeout_s > 0, "generate_timeout_s", "a float > 0"),
        ]
        for ok, name, expected in checks:
            if not ok:
                raise ConfigError(
                    f"VLLMEngineConfig.{name}={getattr(self, name)!r}: expected {expected}")

    def llm_kwargs(self, model_path: str, *, on_gpu: bool) -> dict:
        """Keyword arguments for `vllm.LLM` (the engine adds none of its own beyond these)."""
        kv_bytes = self.kv_cache_bytes
        if kv_bytes is None and not on_gpu:
            kv_bytes = CPU_KV_CACHE_BYTES
        return dict(
            model=model_path, tokenizer=model_path, dtype=self.dtype, seed=0,
            tensor_parallel_size=self.tensor_parallel_size,
            distributed_executor_backend="uni" if self.tensor_parallel_size == 1 else "mp",
            gpu_memory_utilization=self.gpu_memory_utilization, kv_cache_memory_bytes=kv_bytes,
            max_model_len=self.max_model_len, max_num_seqs=self.max_num_seqs,
            enable_prefix_caching=self.enable_prefix_caching, enforce_eager=self.enforce_eager,
            enable_sleep_mode=self.enable_sleep_mode and on_gpu,
            logprobs_mode="processed_logprobs", disable_log_stats=True,
            # a prompt split over steps makes vLLM rewind the request's generator, which CPU
            # generators cannot do ("CPU Generator does not use offset"): whole prompts only
            enable_chunked_prefill=None if on_gpu else False,
            worker_extension_cls="alignflow.tasks.engines.vllm_worker.AlignflowWorkerExtension",
        )
