"""OpenRLHF flags alignflow accepts but has no key for: one table, one entry per flag.

Each entry says which values ask for nothing alignflow lacks (`accepts`: usually OpenRLHF's
default, e.g. `--zero_stage 0`, `--vllm_num_engines 0`) and why any other value cannot be
honoured. Kinds:
- `hardware`: needs a part not built (or not selectable) yet — vLLM, DeepSpeed, GPU
  placement. A problem line, unless the run is started with `--ignore-hardware`, which
  turns it into a note and runs on what this machine has.
- `unsupported`: a feature alignflow does not have (GSPO, Muon, async training, VLMs). A
  problem line.
- `inert`: accepted and without effect here (the reason says why); a note line.
When a part lands, its entries leave this table and become config keys (`flows/aliases.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

Kind = Literal["hardware", "unsupported", "inert"]


@dataclass(frozen=True)
class Gap:
    kind: Kind
    reason: str
    accepts: Callable[[str], bool]  # values (as typed) that need nothing alignflow lacks


def _is(*ok: str) -> Callable[[str], bool]:
    words = {w.lower() for w in ok}
    return lambda value: value.strip().lower() in words


OFF = _is("false", "0", "no", "off")
NONE = _is("none", "null", "")
ANY: Callable[[str], bool] = lambda value: True  # noqa: E731

VLLM = "needs the vLLM engine, which is not selectable by config yet (generation uses HF)"
DS = ("needs the DeepSpeed trainer, which is not selectable by config yet (training uses "
      "PyTorch on this machine)")
GPUS = "not available on this machine: per-role GPUs need the GPU placement part (not built yet)"
NODES = "not available on this machine: multi-node roles need the distributed part (not built yet)"
DYNAMIC = "token-budget (dynamic) batching is not implemented; batches are counted in samples"
RL_EVAL = "RL evaluation on a separate prompt set is not implemented"
ASYNC = "asynchronous (off-policy) training is not implemented"

GAPS: dict[str, Gap] = {}


def _add(names: str, kind: Kind, reason: str, accepts: Callable[[str], bool]) -> None:
    for name in names.split():
        GAPS[name] = Gap(kind, reason, accepts)


# -- hardware: placement, vLLM, DeepSpeed, kernels --------------------------------------------
for _role in ("ref", "actor", "critic", "reward"):
    _add(f"{_role}_num_nodes {_role}.num_nodes", "hardware", NODES, _is("1"))
    _add(f"{_role}_num_gpus_per_node {_role}.num_gpus_per_node", "hardware", GPUS, _is("0"))
_add("vllm_num_engines vllm.num_engines", "hardware", VLLM, _is("0", "none"))
_add("vllm_tensor_parallel_size vllm.tensor_parallel_size", "hardware", VLLM, _is("1"))
_add("vllm_sync_backend vllm.sync_backend", "hardware", VLLM, _is("nccl", "gloo"))
_add("vllm_sync_with_ray vllm.sync_with_ray enable_prefix_caching vllm.enable_prefix_caching "
     "enforce_eager vllm.enforce_eager vllm_enable_sleep vllm.enable_sleep", "hardware", VLLM, OFF)
_add("vllm_gpu_memory_utilization vllm.gpu_memory_utilization", "hardware", VLLM, _is("0.95"))
_add("zero_stage ds.zero_stage", "hardware", DS, _is("0"))
_add("adam_offload ds.adam_offload deepcompile ds.deepcompile overlap_comm ds.overlap_comm "
     "use_ds_universal_ckpt ds.use_universal_ckpt disable_ds_ckpt ckpt.disable_ds "
     "deepspeed_enable_sleep ds.enable_sleep", "hardware", DS, OFF)
_add("zpg ds.zpg ds_tensor_parallel_size ds.tensor_parallel_size", "hardware", DS, _is("1"))
_add("grad_accum_dtype ds.grad_accum_dtype", "hardware", DS, NONE)
_add("ring_attn_size ds.ring_attn_size ring_head_stride ds.ring_attn_head_stride", "hardware",
     "ring attention (sequence parallelism) needs the distributed part", _is("1"))
_add("attn_implementation ds.attn_implementation", "hardware",
     "flash attention needs a GPU and flash-attn; alignflow uses sdpa", _is("sdpa", "eager"))
_add("ds.experts_implementation", "hardware", "MoE expert kernels are not available", NONE)
_add("use_liger_kernel ds.use_liger_kernel", "hardware", "Liger kernels need a GPU", OFF)
_add("load_in_4bit ds.load_in_4bit", "hardware", "4-bit loading needs bitsandbytes on a GPU", OFF)
_add("lora_rank ds.lora.rank", "hardware",
     "LoRA is not selectable by config yet (tasks/modeling/lora.py)", _is("0"))
_add("lora_alpha ds.lora.alpha lora_dropout ds.lora.dropout target_modules "
     "ds.lora.target_modules", "hardware", "used with LoRA only (lora_rank 0: no effect)", ANY)
_add("value_head_prefix ds.value_head_prefix", "hardware",
     "alignflow's reward and value heads are named `score`", _is("score"))
_add("use_dynamic_batch train.dynamic_batch_enable", "unsupported", DYNAMIC, OFF)
_add("rollout_max_tokens_per_gpu rollout.max_tokens_per_gpu", "unsupported", DYNAMIC, NONE)
_add("train_max_tokens_per_gpu train.max_tokens_per_gpu", "unsupported",
     "used with dynamic batching only", ANY)
_add("vllm_generate_batch_size rollout.vllm_generate_batch_size", "unsupported",
     "over-sampling needs asynchronous training (not implemented)", NONE)

# -- algorithms and features alignflow does not have ------------------------------------------
_add("policy_loss_type actor.policy_loss_type", "unsupported",
     "GSPO is not implemented (ppo; dual clip with --dual_clip)", _is("ppo"))
_add("lr_scheduler actor.lr_scheduler critic.lr_scheduler", "unsupported",
     "alignflow schedules a warmup then a cosine to min_lr_ratio only", _is("cosine_with_min_lr"))
_add("optim actor.optim critic.optim", "unsupported", "Muon is not implemented (AdamW)",
     _is("adam"))
for _prefix in ("", "actor.", "critic."):
    _add(" ".join(f"{_prefix}muon.{k}" for k in ("lr", "momentum", "ns_steps", "nesterov",
                                                 "no_nesterov")),
         "unsupported", "used with Muon only (not implemented)", ANY)
_add("aux_loss_coef actor.aux_loss_coef model.aux_loss_coef", "unsupported",
     "the MoE auxiliary loss is not implemented", _is("0", "0.0"))
_add("enable_ema train.enable_ema", "unsupported", "an EMA copy of the policy is not implemented",
     OFF)
_add("ema_beta train.ema_beta", "unsupported", "used with EMA only (not implemented)", ANY)
_add("async_train train.async_enable partial_rollout train.partial_rollout_enable", "unsupported",
     ASYNC, OFF)
_add("async_queue_size train.async_queue_size", "unsupported", ASYNC, ANY)
_add("enable_vllm_is_correction algo.advantage.is_correction_enable", "unsupported",
     "importance-sampling correction of vLLM log-probs is not implemented (alignflow's "
     "behaviour log-probs are the trainer's)", OFF)
_add("vllm_is_truncated_threshold algo.advantage.is_correction_threshold vllm_is_correction_type "
     "algo.advantage.is_correction_type", "unsupported", "used with IS correction only", ANY)
_add("agent_func_path train.agent_func_path", "unsupported",
     "agent (multi-turn environment) rollouts are not implemented", NONE)
_add("stop_properly_penalty_coef reward.stop_properly_penalty_coef", "unsupported",
     "the stop-properly penalty is not implemented", NONE)
_add("data.image_key", "unsupported", "vision-language models are not supported", ANY)
_add("data.max_images_per_prompt", "unsupported", "vision-language models are not supported",
     _is("0"))
_add("actor.freeze_visual_encoder", "unsupported", "vision-language models are not supported", OFF)
_add("eval_dataset eval.dataset", "unsupported", RL_EVAL, NONE)
_add("eval_steps eval.steps", "unsupported", RL_EVAL, _is("-1"))
_add("eval_split eval.split eval_temperature eval.temperature eval_n_samples_per_prompt "
     "eval.n_samples_per_prompt", "unsupported", RL_EVAL, ANY)
_add("best_metric_key ckpt.best_metric_key", "unsupported", RL_EVAL, _is("", "none"))
_add("save_value_network critic.save_value_network", "unsupported",
     "exporting the critic as an HF folder is not implemented", OFF)
_add("nll_loss_coef model.nll_loss_coef", "unsupported", "DPO's NLL term is not implemented",
     _is("0", "0.0"))
_add("margin_loss model.margin_loss_enable", "unsupported",
     "per-row reward margins are not implemented (model.margin is one constant margin)", OFF)
_add("tokenizer_chat_template data.tokenizer_chat_template", "unsupported",
     "a chat template other than the tokenizer's is not implemented", NONE)
_add("disable_fast_tokenizer data.disable_fast_tokenizer", "unsupported",
     "alignflow uses the fast tokenizer", OFF)
_add("gradient_checkpointing_use_reentrant actor.gradient_checkpointing_reentrant "
     "model.gradient_checkpointing_reentrant", "unsupported",
     "alignflow's activation checkpointing is non-reentrant", OFF)
_add("use_ms", "unsupported", "ModelScope is not supported (local folders, offline names and "
     "the HF cache are)", OFF)

# -- accepted, without effect here ----------------------------------------------------------------
_add("local_rank", "inert", "set by the DeepSpeed launcher; alignflow starts its own processes",
     ANY)
_add("dataloader_num_workers data.dataloader_num_workers", "inert",
     "alignflow reads prepared data from the store, without loader workers", ANY)
_add("full_determinism train.full_determinism_enable", "inert",
     "alignflow runs are deterministic on CPU already (bitwise across a resume)", ANY)
_add("compute_fp32_loss model.compute_fp32_loss_enable", "inert",
     "alignflow computes losses in fp32 always", ANY)
_add("max_ckpt_mem ckpt.max_mem", "inert",
     "alignflow caps checkpoints by count (ckpt.max_num), not by size", ANY)
_add("multiturn data.multiturn", "inert",
     "multi-turn SFT: give conversations in data.input_key and set data.output_key null", ANY)
_add("perf actor_init_on_gpu train_split", "inert", "read nowhere in OpenRLHF v0.9.10", ANY)
_add("ptx_coef", "inert", "read nowhere in OpenRLHF v0.9.10 (alignflow's pretraining mix is "
     "algo.ptx.ptx_coef with algo.ptx.pretrain_data)", ANY)


def gap(name: str) -> Gap | None:
    """The table's entry for a flag name (dashes or underscores), if any."""
    return GAPS.get(name.replace("-", "_"))
