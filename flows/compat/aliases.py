"""Other names of the built-in flows' config keys, all in one place.

The canonical keys are OpenRLHF 0.11's dotted names (`actor.model_name_or_path`,
`algo.kl.init_coef`, `train.batch_size`, ...). Their other names are aliases, accepted by
every source (flags, `--set`, YAML keys, a resumed run's saved config):
- the flags of OpenRLHF's older releases (`--pretrain`, `--init_kl_coef`,
  `--train_batch_size`), derived from the reference's renames (`compat/rules.py`); one flag
  may set several keys, as it did there (`--lr_warmup_ratio`: the actor's and the critic's).
  One flag means one thing in every flow, but not always one key: `--pretrain` is the RL
  flows' `actor.model_name_or_path` and the offline flows' `model.model_name_or_path`, as
  in OpenRLHF, so each family takes the flags of its own OpenRLHF CLIs;
- alignflow's keys before they took OpenRLHF's names (`model.pretrain`,
  `generate.n_samples_per_prompt`, `optim.learning_rate`, the loops' `train.learning_rate`),
  so runs started with them resume and old YAML files load; and a few alignflow-only
  spellings (`--learning_rate` for the actor's, `--top_k`, `--max_iterations`).
"""

from __future__ import annotations

from alignflow.flows.compat.rules import openrlhf_aliases

Target = str | tuple[str, ...]

# The OpenRLHF CLIs each family answers (the first that has a flag decides its key).
RL_CLIS = ("train_ppo_ray", "train_ppo")
_BOTH = ("actor", "critic")


def _roles(key: str) -> tuple[str, ...]:
    return tuple(f"{role}.{key}" for role in _BOTH)


def _optim(prefix: str, lr: Target, roles: bool = False) -> dict[str, Target]:
    """An old optimiser section (`optim.*`, the loops' `train.*`) onto 0.11's keys."""
    each = _roles if roles else (lambda key: key)
    return {f"{prefix}learning_rate": lr, f"{prefix}adam_betas": each("adam.betas"),
            f"{prefix}l2": each("adam.weight_decay"),
            f"{prefix}lr_warmup_ratio": each("lr_warmup_ratio"),
            f"{prefix}min_lr_ratio": each("min_lr_ratio"), f"{prefix}max_norm": each("max_norm"),
            f"{prefix}train_batch_size": "train.batch_size",
            f"{prefix}micro_train_batch_size": "train.micro_batch_size"}


# -- alignflow's own older names, shared by every family ------------------------------------
SHARED: dict[str, Target] = {
    "keep_checkpoints": "ckpt.max_num", "model.dtype": "ds.param_dtype",
    "optim.packing_samples": "ds.packing_samples", "train.save_steps": "ckpt.save_steps",
    "trainer": "ds.trainer", "optim.max_epochs": "train.max_epochs",
}
PROMPTS: dict[str, Target] = {
    "data.prompt_data": "data.prompt_dataset", "data.prompt_data_probs": "data.prompt_probs",
    "top_k": "rollout.top_k", "generate": "rollout",
    "generate.rollout_batch_size": "rollout.batch_size",
    "generate.generate_max_len": "rollout.max_new_tokens",
    "generate.micro_rollout_batch_size": "rollout.micro_batch_size",
    "reward_weights": "reward.weights", "rewards": "reward",
    "rewards.normalize": "reward.normalize_enable",
}

RL: dict[str, Target] = {
    **openrlhf_aliases(*RL_CLIS), **SHARED, **PROMPTS,
    # a command line's one-value form (<= v0.9.0) is its release's (compat/era.py); the
    # two-value form is a plain rename, also in YAML files and --set
    "vllm_is_truncated_threshold": "algo.advantage.is_correction_threshold",
    "ref_pretrain": "ref.model_name_or_path", "learning_rate": "actor.adam.lr",
    "loss_type": "actor.policy_loss_type",  # TRL's GRPOConfig name (cispo, sapo)
    "min_lr_ratio": _roles("min_lr_ratio"), "max_iterations": "train.max_iterations",
    "eps_clip_high": "actor.eps_clip_high", "freeze_actor_steps": "critic.freezing_steps",
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
    **_optim("optim.", "actor.adam.lr", roles=True),
    "optim.actor_learning_rate": "actor.adam.lr", "optim.critic_learning_rate": "critic.adam.lr",
}

# -- offline flows (train_sft, train_dpo, train_rm; train_kd, train_kto, train_prm until
# v0.9.5) and the loops' training half ------------------------------------------------------
OFFLINE_OLD: dict[str, Target] = {
    **SHARED, **_optim("optim.", "adam.lr"), "actor_learning_rate": "adam.lr",
    "model.pretrain": "model.model_name_or_path",
    "model.gradient_checkpointing": "model.gradient_checkpointing_enable",
}
OFFLINE: dict[str, Target] = {
    **OFFLINE_OLD, "deepspeed_enable_sleep": "ds.enable_sleep", "split": "data.dataset_split",
    "max_steps": "train.max_steps", "model.ref_pretrain": "ref.model_name_or_path",
    "model.teacher_model": "teacher.model_name_or_path", "data.split": "data.dataset_split",
    "data.eval_dataset": "eval.dataset", "data.eval_split": "eval.split",
    "data.eval_ratio": "eval.ratio", "data.pretrain_mode": "model.pretrain_mode_enable",
    # the loss knobs live in `model.*` (as OpenRLHF 0.11 has them); alignflow had `loss.*`
    "loss.beta": "model.beta", "loss.ipo": "model.ipo_enable",
    "loss.label_smoothing": "model.label_smoothing", "loss.loss_type": "model.loss_type",
    "dpo.beta": "model.beta", "dpo.label_smoothing": "model.label_smoothing",
    "dpo.variant": "model.loss_type", "loss.desirable_weight": "model.desirable_loss_weight",
    "loss.undesirable_weight": "model.undesirable_loss_weight", "margin": "model.margin",
    "loss.rm_loss": "model.loss_type", "loss.margin": "model.margin",
}


def offline(*clis: str) -> dict[str, Target]:
    """An offline flow's aliases: its OpenRLHF CLIs' flags and alignflow's older names."""
    return {**openrlhf_aliases(*clis), **OFFLINE}


# -- durable loops (no OpenRLHF counterpart: RL's data/rollout/reward, offline training) ----
def loops(*clis: str) -> dict[str, Target]:
    return {**openrlhf_aliases(*clis), **OFFLINE_OLD, **PROMPTS, **_optim("train.", "adam.lr")}


# -- keys alignflow's own earlier layouts had and no flow has now: a saved config holding
# them still resumes (they are dropped with a note); any other unknown key is an error
RETIRED_OFFLINE = frozenset({"data.pretrain_mode", "loss.desirable_weight", "loss.kd_alpha",
                             "loss.margin", "loss.rm_loss", "loss.undesirable_weight",
                             "model.teacher_model", "model.kd_alpha"})
RETIRED_LOOPS = frozenset({"model.ref_pretrain"})
