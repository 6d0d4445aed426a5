"""The node checks, in priority order: what one GPU can confirm or refute, most useful first.

Each entry names its module (run in its own process), the argument it gets, its own time
limit, whether it needs CUDA, what it exercises, and what the code review expects. The
runner starts them in this order until its deadline.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Check:
    """One check: `python -P -m bench.gpu_check.checks.<module> [arg]`."""

    name: str
    module: str
    timeout_s: float
    needs_cuda: bool
    exercises: str
    expected: str = "pass"
    arg: str | None = None

    @property
    def argv(self) -> list[str]:
        return ["-P", "-m", f"bench.gpu_check.checks.{self.module}",
                *([self.arg] if self.arg else [])]


CHECKS: tuple[Check, ...] = (
    Check("versions", "versions", 120, False,
          "python, torch, CUDA, driver, GPU, nvcc; every bundled package imports at its "
          "version; unmet and shadowed requirements"),
    Check("tiny_model", "tiny_model", 120, False,
          "the tiny offline Llama built by alignflow.tasks.zoo.tiny (the model every check uses)"),
    Check("gpu_tests", "gpu_tests", 300, True,
          "pytest tests/gpu on the tiny model: inline GRPO and PPO on CUDA, bf16, gradient "
          "checkpointing, peak GPU memory"),
    Check("nccl_stats_allreduce", "nccl_reduce", 90, True,
          "tasks/distributed/reduce.py statistics on the GPU group (cpu:gloo,cuda:nccl), "
          "world 1, rank count patched to 2",
          "pass (an NCCL-only group failed: 'No backend type associated with device type "
          "cpu')"),
    Check("weight_sync_nccl", "weight_sync", 90, True,
          "tasks/engines/vllm/broadcast.py SyncGroup on real NCCL; packed buckets on cuda",
          "round trip equal"),
    Check("sync_staging_7b", "sync_staging", 120, True,
          "tasks/engines/vllm/engine_sync.py + worker.py: a sync of random bf16 weights of "
          "Llama-2-7B's shape on the GPU, loaded bucket by bucket into a fake vLLM model "
          "(tests/fast/test_sync_staging.py); extra peak above the weights and time",
          "extra peak <= one bucket + the largest tensor (issue 41)"),
    Check("hybrid_sync_ipc", "hybrid_sync", 180, False,
          "tasks/engines/vllm/ipc.py + engine_sync.py + worker.py: a hybrid engine's sync on "
          "one GPU, the engine's worker in a second process (sleep, weights woken for the "
          "sync, KV cache after), Llama-2-7B widths with 8 layers: by CUDA IPC handle vs "
          "pickled bytes; seconds, message size, extra peak of each process (no CUDA: the "
          "same at 1/32 width on the CPU, shared-memory handles)",
          "weights equal in both modes; a handle message < 4 KiB; IPC extra peak <= one "
          "bucket + the largest tensor (issue 41 item 6)"),
    Check("memory_plan", "memory_plan", 240, True,
          "tasks/plan/memory/ against torch's per-phase peaks of a random 1.1B Llama (bf16, "
          "AdamW): torch trainer, ZeRO-2, ZeRO-3, ZeRO-3 + a ZeRO-3 reference",
          "every setting's peak within 15% of the plan (issue 42)"),
    Check("sleep_torch", "trainer_sleep", 150, True,
          "tasks/trainers/sleep.py sleep/wake on a ~170M Llama, PyTorch trainer",
          "frees ~all of the trainer's GPU memory", "torch"),
    Check("sleep_zero2", "trainer_sleep", 180, True,
          "tasks/trainers/sleep.py sleep/wake on a ~170M Llama, DeepSpeed ZeRO-2 "
          "(offload_states)", "frees ~all (before the fix ~nothing: ZeRO's flat buffers "
          "stayed)", "zero2"),
    Check("sleep_zero3", "trainer_sleep", 180, True,
          "tasks/trainers/sleep.py sleep/wake on a ~170M Llama, DeepSpeed ZeRO-3 "
          "(offload_states + AdamW's masters and moments)", "frees ~all (before the fix "
          "~nothing: ZeRO's partitions stayed)", "zero3"),
    Check("zero2_train", "zero_train", 150, True,
          "DeepSpeedTrainer ZeRO-2 steps on CUDA against TorchTrainer; gathered sync", arg="2"),
    Check("zero3_train", "zero_train", 150, True,
          "DeepSpeedTrainer ZeRO-3 steps on CUDA against TorchTrainer; gathered sync", arg="3"),
    Check("rank_bf16", "rank_bf16", 150, True,
          "host_device sets the rank's GPU current (LOCAL_RANK); param_dtype bf16 under the "
          "PyTorch trainer and ZeRO-2: bf16 module, fp32 masters, bf16 sync",
          "pass (before issue 21 §3.10/§3.11: fp32 weights under autocast, no set_device)"),
    Check("lora_cuda", "lora_cuda", 120, True,
          "LoRA adapters (trainers.build) on CUDA: base frozen, merged weights sync into "
          "an HF engine"),
    Check("ray_gpu", "ray_gpu", 240, True,
          "GRPO with the Ray executor: a host actor with num_gpus=1 (Ray's "
          "CUDA_VISIBLE_DEVICES)", arg="whole"),
    Check("ray_quarter_gpus", "ray_gpu", 240, True,
          "PPO with four hosts (actor, ref, critic, reward) at placement.num_gpus=0.25 on "
          "one GPU", arg="quarter"),
    Check("cpu_adam_jit", "cpu_adam", 300, True,
          "DeepSpeedCPUAdam JIT build with the node's nvcc, then one step",
          "builds, or a CUDA-version message"),
    Check("perf_tiny", "perf", 120, True,
          "for the record: peak GPU memory and tokens/s of a generate and a learn step on "
          "the tiny model"),
    Check("trl_peers", "trl_peers", 420, True,
          "bench/peers_gpu.py: TRL and alignflow on this GPU, random-init ~1B Llama in bf16, "
          "SFT, DPO and GRPO with HF generation: tokens/s, MFU, peak memory (issue 46); "
          "last in line: run it alone with --only versions,trl_peers",
          "both sides run; alignflow >= TRL's tokens/s on each (issue 46's target)"),
    Check("learn_bf16", "learn_bf16", 480, False,
          "examples/learn_arith.py on the GPU (issue 43): a random-init ~104M Llama in bf16 "
          "(fp32 masters), SFT then GRPO with the HF engine, seed 0, inline; the held-out "
          "curve and each stage's seconds; then the HF engine's behaviour log-probs against "
          "the learn step's π_old forward (correction.proximal_logprobs) of the same tokens "
          "in bf16: |Δ log p| p50/p90/p99/max, share outside exp(Δ) in [0.8, 1.2] (no CUDA: "
          "the tiny model in fp32, a short schedule); alone it takes ~4 min",
          "held-out correctness after GRPO above after SFT (the CPU run of seed 0: 0.755 -> "
          "0.900); max |Δ log p| < 0.5 (tests/gpu's bf16 bound)"),
)


def by_name() -> dict[str, Check]:
    return {c.name: c for c in CHECKS}
