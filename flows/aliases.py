"""Other names of the built-in flows' config keys, all in one place.

The canonical keys are OpenRLHF 0.11's dotted names (`actor.model_name_or_path`,
`algo.kl.init_coef`, `train.batch_size`, ...). Their other names are aliases, accepted by
every source (flags, `--set`, YAML keys, a resumed run's saved config):
- OpenRLHF 0.9's flat flags (`--pretrain`, `--init_kl_coef`, `--train_batch_size`); one
  flat flag may set several keys, as it did there (`--lr_warmup_ratio` sets the actor's and
  the critic's);
- alignflow's keys before they took OpenRLHF's names (`model.pretrain`,
  `generate.n_samples_per_prompt`, `optim.learning_rate`, the loops' `train.learning_rate`),
  so runs started with them resume and old YAML files load.

One flag means one thing in every flow, but not always one key: `--pretrain` is the RL
flows' `actor.model_name_or_path` and the offline flows' `model.model_name_or_path`, as in
OpenRLHF. So there is one table per family (`RL`, `OFFLINE`, `LOOPS`), built from shared
parts, plus the loss knobs of the offline objectives; a config class keeps the entries
whose keys it has.
"""

from __future__ import annotations

Target = str | tuple[str, ...]

# -- shared by RL flows and loops: prompt data, sampling, reward sources ------------------
PROMPT_DATA: dict[str, Target] = {
    "prompt_data": "data.prompt_dataset", "prompt_data_probs": "data.prompt_probs",
    "prompt_split": "data.prompt_split", "prompt_max_len": "data.prompt_max_len",
    "max_len": "data.max_len",
    "input_key": "data.input_key", "label_key": "data.label_key",
    "apply_chat_template": "data.apply_chat_template", "input_template": "data.input_template",
    "max_samples": "data.max_samples",
    "data.prompt_data": "data.prompt_dataset", "data.prompt_data_probs": "data.prompt_probs",
}
ROLLOUT: dict[str, Target] = {
    "rollout_batch_size": "rollout.batch_size",
    "n_samples_per_prompt": "rollout.n_samples_per_prompt",
    "max_new_tokens": "rollout.max_new_tokens", "generate_max_len": "rollout.max_new_tokens",
    "temperature": "rollout.temperature", "top_p": "rollout.top_p", "top_k": "rollout.top_k",
    "micro_rollout_batch_size": "rollout.micro_batch_size",
    "generate": "rollout", "generate.rollout_batch_size": "rollout.batch_size",
    "generate.generate_max_len": "rollout.max_new_tokens",
    "generate.micro_rollout_batch_size": "rollout.micro_batch_size",
}
REWARD: dict[str, Target] = {
    "reward_pretrain": "reward.model_name_or_path", "remote_rm_url": "reward.remote_url",
    "reward_weights": "reward.weights", "normalize_reward": "reward.normalize_enable",
    "rewards": "reward", "rewards.normalize": "reward.normalize_enable",
}
CKPT: dict[str, Target] = {
    "save_steps": "ckpt.save_steps", "max_ckpt_num": "ckpt.max_num",
    "save_path": "ckpt.output_dir", "ckpt_path": "ckpt.path", "load_checkpoint": "ckpt.load_enable",
    "save_hf_ckpt": "ckpt.save_hf",
    "keep_checkpoints": "ckpt.max_num", "packing_samples": "ds.packing_samples",
    "param_dtype": "ds.param_dtype", "model.dtype": "ds.param_dtype",
    "optim.packing_samples": "ds.packing_samples", "train.save_steps": "ckpt.save_steps",
}
# Live logging: OpenRLHF 0.9's flags for 0.11's `logger.*` keys (every family).
LOGGER: dict[str, Target] = {
    "use_tensorboard": "logger.tensorboard_dir", "logging_steps": "logger.logging_steps",
    "use_wandb": "logger.wandb.key", "wandb_org": "logger.wandb.org",
    "wandb_group": "logger.wandb.group", "wandb_project": "logger.wandb.project",
    "wandb_run_name": "logger.wandb.run_name",
}

# -- generation engines and hardware (RL flows and loops) ---------------------------------
VLLM: dict[str, Target] = {
    "vllm_num_engines": "vllm.num_engines",
    "vllm_tensor_parallel_size": "vllm.tensor_parallel_size",
    "vllm_gpu_memory_utilization": "vllm.gpu_memory_utilization",
    "enable_prefix_caching": "vllm.enable_prefix_caching", "enforce_eager": "vllm.enforce_eager",
    "vllm_enable_sleep": "vllm.enable_sleep", "vllm_sync_backend": "vllm.sync_backend",
    "vllm_sync_with_ray": "vllm.sync_with_ray",
    "attn_implementation": "ds.attn_implementation",
}

# -- the training backend: OpenRLHF 0.9's DeepSpeed and LoRA flags (0.11: `ds.*`) ----------
DS: dict[str, Target] = {
    "trainer": "ds.trainer", "zero_stage": "ds.zero_stage", "adam_offload": "ds.adam_offload",
    "overlap_comm": "ds.overlap_comm", "grad_accum_dtype": "ds.grad_accum_dtype",
    "zpg": "ds.zpg", "deepcompile": "ds.deepcompile",
    "ds_tensor_parallel_size": "ds.tensor_parallel_size", "ring_attn_size": "ds.ring_attn_size",
    "ring_head_stride": "ds.ring_attn_head_stride",
    "use_ds_universal_ckpt": "ds.use_universal_ckpt", "deepspeed_enable_sleep": "ds.enable_sleep",
    "load_in_4bit": "ds.load_in_4bit", "lora_rank": "ds.lora.rank", "lora_alpha": "ds.lora.alpha",
    "lora_dropout": "ds.lora.dropout", "target_modules": "ds.lora.target_modules",
}

# -- RL flows (OpenRLHF's train_ppo_ray) ----------------------------------------------------
_BOTH = ("actor", "critic")


def _roles(key: str) -> tuple[str, ...]:
    return tuple(f"{role}.{key}" for role in _BOTH)


RL: dict[str, Target] = {
    **PROMPT_DATA, **ROLLOUT, **REWARD, **CKPT, **VLLM, **DS, **LOGGER,
    # models and placement
    **{f"{role}_{key}": f"{role}.{key}" for role in ("actor", "critic", "ref", "reward")
       for key in ("num_nodes", "num_gpus_per_node")},
    "pretrain": "actor.model_name_or_path", "ref_pretrain": "ref.model_name_or_path",
    "critic_pretrain": "critic.model_name_or_path",
    "gradient_checkpointing": "actor.gradient_checkpointing_enable",
    "colocate_all_models": "train.colocate_all", "colocate_actor_ref": "train.colocate_actor_ref",
    "colocate_critic_reward": "train.colocate_critic_reward",
    "ref_reward_offload": ("ref.offload", "reward.offload"),
    # algorithm
    "advantage_estimator": "algo.advantage.estimator", "gamma": "algo.advantage.gamma",
    "lambd": "algo.advantage.lambd", "no_advantage_std_norm": "algo.advantage.no_std_norm",
    "init_kl_coef": "algo.kl.init_coef", "kl_target": "algo.kl.target",
    "kl_horizon": "algo.kl.horizon", "kl_estimator": "algo.kl.estimator",
    "use_kl_loss": "algo.kl.use_loss", "dynamic_filtering": "algo.dynamic_filtering_enable",
    "dynamic_filtering_reward_range": "algo.dynamic_filtering_range",
    "pretrain_data": "algo.ptx.pretrain_data",
    "eps_clip": "actor.eps_clip", "eps_clip_low_high": "actor.eps_clip_low_high",
    "eps_clip_high": "actor.eps_clip_high", "dual_clip": "actor.dual_clip",
    "entropy_loss_coef": "actor.entropy_coef", "value_clip": "critic.value_clip",
    "freezing_actor_steps": "critic.freezing_steps", "freeze_actor_steps": "critic.freezing_steps",
    "reward_clip_range": "reward.clip_range", "overlong_buffer_len": "reward.overlong_buffer_len",
    "overlong_penalty_factor": "reward.overlong_penalty_factor",
    # asynchronous RL, agents, off-policy correction (OpenRLHF 0.9's flags)
    "async_train": "train.async_enable", "async_queue_size": "train.async_queue_size",
    "partial_rollout": "train.partial_rollout_enable", "agent_func_path": "train.agent_func_path",
    "enable_vllm_is_correction": "algo.advantage.is_correction_enable",
    "vllm_is_correction_type": "algo.advantage.is_correction_type",
    "vllm_is_truncated_threshold": "algo.advantage.is_correction_threshold",
    # optimisers and batching
    "actor_learning_rate": "actor.adam.lr", "learning_rate": "actor.adam.lr",
    "critic_learning_rate": "critic.adam.lr", "adam_betas": _roles("adam.betas"),
    "l2": _roles("adam.weight_decay"), "lr_warmup_ratio": _roles("lr_warmup_ratio"),
    "min_lr_ratio": _roles("min_lr_ratio"), "max_norm": _roles("max_norm"),
    "train_batch_size": "train.batch_size", "micro_train_batch_size": "train.micro_batch_size",
    "max_epochs": "train.max_epochs", "num_episodes": "train.num_episodes",
    "max_iterations": "train.max_iterations",
    # alignflow's keys before they took OpenRLHF's names
    "model.pretrain": "actor.model_name_or_path", "model.ref_pretrain": "ref.model_name_or_path",
    "model.critic_pretrain": "critic.model_name_or_path",
    "model.gradient_checkpointing": "actor.gradient_checkpointing_enable",
    "placement.colocate_all_models": "train.colocate_all",
    "placement.colocate_actor_ref": "train.colocate_actor_ref",
    "placement.colocate_critic_reward": "train.colocate_critic_reward",
    "placement.offload_idle": ("ref.offload", "reward.offload"),
    "algo.advantage_estimator": "algo.advantage.estimator", "algo.gamma": "algo.advantage.gamma",
    "algo.lambd": "algo.advantage.lambd",
    "algo.no_advantage_std_norm": "algo.advantage.no_std_norm",
    "algo.kl.init_kl_coef": "algo.kl.init_coef", "algo.kl.kl_target": "algo.kl.target",
    "algo.kl.kl_horizon": "algo.kl.horizon", "algo.kl.kl_estimator": "algo.kl.estimator",
    "algo.kl.use_kl_loss": "algo.kl.use_loss",
    "algo.dynamic_filtering": "algo.dynamic_filtering_enable",
    "algo.eps_clip": "actor.eps_clip", "algo.eps_clip_high": "actor.eps_clip_high",
    "algo.dual_clip": "actor.dual_clip", "algo.entropy_coef": "actor.entropy_coef",
    "algo.value_clip": "critic.value_clip", "algo.freeze_actor_steps": "critic.freezing_steps",
    "algo.reward_clip_range": "reward.clip_range",
    "algo.normalize_reward": "reward.normalize_running",
    "algo.overlong_buffer_len": "reward.overlong_buffer_len",
    "algo.overlong_penalty_factor": "reward.overlong_penalty_factor",
    "algo.max_epochs": "train.max_epochs",
    "optim.learning_rate": "actor.adam.lr", "optim.actor_learning_rate": "actor.adam.lr",
    "optim.critic_learning_rate": "critic.adam.lr", "optim.adam_betas": _roles("adam.betas"),
    "optim.l2": _roles("adam.weight_decay"), "optim.lr_warmup_ratio": _roles("lr_warmup_ratio"),
    "optim.min_lr_ratio": _roles("min_lr_ratio"), "optim.max_norm": _roles("max_norm"),
    "optim.train_batch_size": "train.batch_size",
    "optim.micro_train_batch_size": "train.micro_batch_size",
    "optim.max_epochs": "train.max_epochs",
}

# -- offline flows (OpenRLHF's train_sft / train_dpo / train_rm; train_kto, train_prm of
# 0.9.5) and the loops' training half ------------------------------------------------------
OPTIM: dict[str, Target] = {
    "learning_rate": "adam.lr", "actor_learning_rate": "adam.lr", "l2": "adam.weight_decay",
    "adam_betas": "adam.betas", "train_batch_size": "train.batch_size",
    "micro_train_batch_size": "train.micro_batch_size", "max_epochs": "train.max_epochs",
    "pretrain": "model.model_name_or_path",
    "gradient_checkpointing": "model.gradient_checkpointing_enable",
    "model.pretrain": "model.model_name_or_path",
    "model.gradient_checkpointing": "model.gradient_checkpointing_enable",
    "optim.learning_rate": "adam.lr", "optim.l2": "adam.weight_decay",
    "optim.adam_betas": "adam.betas", "optim.lr_warmup_ratio": "lr_warmup_ratio",
    "optim.min_lr_ratio": "min_lr_ratio", "optim.max_norm": "max_norm",
    "optim.train_batch_size": "train.batch_size",
    "optim.micro_train_batch_size": "train.micro_batch_size",
    "optim.max_epochs": "train.max_epochs",
}
OFFLINE: dict[str, Target] = {
    **CKPT, **OPTIM, **DS, **LOGGER, "attn_implementation": "ds.attn_implementation",
    "ref_pretrain": "ref.model_name_or_path", "ref_offload": "ref.offload",
    "teacher_model": "teacher.model_name_or_path", "pretrain_mode": "model.pretrain_mode_enable",
    "dataset": "data.dataset", "dataset_probs": "data.dataset_probs",
    "dataset_split": "data.dataset_split", "split": "data.dataset_split",
    "eval_dataset": "eval.dataset", "eval_split": "eval.split", "eval_steps": "eval.steps",
    "input_key": "data.input_key", "output_key": "data.output_key",
    "prompt_key": "data.prompt_key", "chosen_key": "data.chosen_key",
    "rejected_key": "data.rejected_key", "label_key": "data.label_key",
    "apply_chat_template": "data.apply_chat_template", "input_template": "data.input_template",
    "max_samples": "data.max_samples", "max_len": "data.max_len",
    "placeholder_token": "data.placeholder_token", "reward_tokens": "data.reward_tokens",
    "max_steps": "train.max_steps",
    "model.ref_pretrain": "ref.model_name_or_path",
    "model.teacher_model": "teacher.model_name_or_path",
    "data.split": "data.dataset_split", "data.eval_dataset": "eval.dataset",
    "data.eval_split": "eval.split", "data.eval_ratio": "eval.ratio",
    "data.pretrain_mode": "model.pretrain_mode_enable",
}
# The loss knobs live in `model.*` (as OpenRLHF 0.11 has them); alignflow had `loss.*`.
DPO_MODEL: dict[str, Target] = {
    "beta": "model.beta", "ipo": "model.ipo_enable", "label_smoothing": "model.label_smoothing",
    "loss.beta": "model.beta", "loss.ipo": "model.ipo_enable",
    "loss.label_smoothing": "model.label_smoothing", "loss.loss_type": "model.loss_type",
    "dpo.beta": "model.beta", "dpo.label_smoothing": "model.label_smoothing",
    "dpo.variant": "model.loss_type",
}
KTO_MODEL: dict[str, Target] = {
    "beta": "model.beta", "desirable_loss_weight": "model.desirable_loss_weight",
    "undesirable_loss_weight": "model.undesirable_loss_weight", "loss.beta": "model.beta",
    "loss.desirable_weight": "model.desirable_loss_weight",
    "loss.undesirable_weight": "model.undesirable_loss_weight",
}
RM_MODEL: dict[str, Target] = {
    "loss": "model.loss_type", "margin": "model.margin", "loss.rm_loss": "model.loss_type",
    "loss.margin": "model.margin",
}
KD_MODEL: dict[str, Target] = {"kd_alpha": "model.kd_alpha", "loss.kd_alpha": "model.kd_alpha"}

# -- durable loops (no OpenRLHF counterpart: RL's data/rollout/reward, offline training) ----
LOOPS: dict[str, Target] = {
    **PROMPT_DATA, **ROLLOUT, **REWARD, **CKPT, **OPTIM, **VLLM, **DS, **LOGGER,
    "train.learning_rate": "adam.lr", "train.train_batch_size": "train.batch_size",
    "train.micro_train_batch_size": "train.micro_batch_size", "train.adam_betas": "adam.betas",
    "train.l2": "adam.weight_decay", "train.lr_warmup_ratio": "lr_warmup_ratio",
    "train.min_lr_ratio": "min_lr_ratio", "train.max_norm": "max_norm",
}


# -- keys alignflow's own earlier layouts had and no flow has now: a saved config holding
# them still resumes (they are dropped with a note); any other unknown key is an error
RETIRED_OFFLINE = frozenset({"data.pretrain_mode", "loss.desirable_weight", "loss.kd_alpha",
                             "loss.margin", "loss.rm_loss", "loss.undesirable_weight",
                             "model.teacher_model"})
RETIRED_LOOPS = frozenset({"model.ref_pretrain"})
