"""Other names of the built-in flows' config keys: OpenRLHF's flag names (`--init_kl_coef`),
and keys renamed since a run could have been started (`optim.actor_learning_rate`).

One table for every family: each flow's config accepts the entries whose key it has, so
`--pretrain`, `--learning_rate` or `--beta` mean the same in every flow that has them.
Every source takes them: flags, `--set` and YAML keys.
"""

from __future__ import annotations

ALIASES: dict[str, str] = {
    # models and placement
    "pretrain": "model.pretrain", "ref_pretrain": "model.ref_pretrain",
    "critic_pretrain": "model.critic_pretrain", "teacher_model": "model.teacher_model",
    "gradient_checkpointing": "model.gradient_checkpointing",
    "colocate_all_models": "placement.colocate_all_models",
    "colocate_actor_ref": "placement.colocate_actor_ref",
    "colocate_critic_reward": "placement.colocate_critic_reward",
    # data: prompts (RL, loops) and datasets (offline)
    "prompt_data": "data.prompt_data", "prompt_data_probs": "data.prompt_data_probs",
    "prompt_split": "data.prompt_split", "prompt_max_len": "data.prompt_max_len",
    "dataset": "data.dataset", "dataset_probs": "data.dataset_probs", "split": "data.split",
    "eval_dataset": "data.eval_dataset", "eval_split": "data.eval_split",
    "input_key": "data.input_key", "output_key": "data.output_key",
    "prompt_key": "data.prompt_key", "chosen_key": "data.chosen_key",
    "rejected_key": "data.rejected_key", "label_key": "data.label_key",
    "apply_chat_template": "data.apply_chat_template", "input_template": "data.input_template",
    "max_samples": "data.max_samples", "pretrain_mode": "data.pretrain_mode",
    "max_len": "data.max_len", "placeholder_token": "data.placeholder_token",
    "reward_tokens": "data.reward_tokens",
    # sampling and rewards
    "rollout_batch_size": "generate.rollout_batch_size",
    "n_samples_per_prompt": "generate.n_samples_per_prompt",
    "generate_max_len": "generate.generate_max_len", "temperature": "generate.temperature",
    "top_p": "generate.top_p", "top_k": "generate.top_k",
    "micro_rollout_batch_size": "generate.micro_rollout_batch_size",
    "remote_rm_url": "rewards.sources", "reward_pretrain": "rewards.sources",
    "reward_weights": "rewards.weights",
    # RL algorithm
    "advantage_estimator": "algo.advantage_estimator", "gamma": "algo.gamma",
    "lambd": "algo.lambd", "eps_clip": "algo.eps_clip", "eps_clip_high": "algo.eps_clip_high",
    "dual_clip": "algo.dual_clip", "value_clip": "algo.value_clip",
    "reward_clip_range": "algo.reward_clip_range", "normalize_reward": "algo.normalize_reward",
    "no_advantage_std_norm": "algo.no_advantage_std_norm",
    "dynamic_filtering": "algo.dynamic_filtering",
    "freeze_actor_steps": "algo.freeze_actor_steps",
    "overlong_buffer_len": "algo.overlong_buffer_len",
    "overlong_penalty_factor": "algo.overlong_penalty_factor",
    "entropy_loss_coef": "algo.entropy_coef", "ptx_coef": "algo.ptx.ptx_coef",
    "pretrain_data": "algo.ptx.pretrain_data", "init_kl_coef": "algo.kl.init_kl_coef",
    "kl_target": "algo.kl.kl_target", "kl_horizon": "algo.kl.kl_horizon",
    "kl_estimator": "algo.kl.kl_estimator", "use_kl_loss": "algo.kl.use_kl_loss",
    # optimiser and schedule (every family)
    "learning_rate": "optim.learning_rate", "actor_learning_rate": "optim.learning_rate",
    "critic_learning_rate": "optim.critic_learning_rate",
    "train_batch_size": "optim.train_batch_size",
    "micro_train_batch_size": "optim.micro_train_batch_size", "max_epochs": "optim.max_epochs",
    "lr_warmup_ratio": "optim.lr_warmup_ratio", "min_lr_ratio": "optim.min_lr_ratio",
    "max_norm": "optim.max_norm", "l2": "optim.l2", "adam_betas": "optim.adam_betas",
    "packing_samples": "optim.packing_samples",
    # offline losses
    "beta": "loss.beta", "ipo": "loss.ipo", "label_smoothing": "loss.label_smoothing",
    "desirable_loss_weight": "loss.desirable_weight",
    "undesirable_loss_weight": "loss.undesirable_weight", "loss": "loss.rm_loss",
    "margin": "loss.margin",
    # run length and cadence
    "num_episodes": "num_episodes", "max_iterations": "max_iterations",
    "save_steps": "save_steps", "eval_steps": "eval_steps", "max_steps": "max_steps",
    # keys renamed by the "one house" refactor (runs started before it resume)
    "optim.actor_learning_rate": "optim.learning_rate", "algo.max_epochs": "optim.max_epochs",
    "train": "optim", "train.save_steps": "save_steps", "dpo": "loss",
    "dpo.variant": "loss.loss_type",
}
