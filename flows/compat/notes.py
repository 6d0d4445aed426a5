"""What alignflow does differently from OpenRLHF for a resolved config, said out loud: one
line each, printed when a run starts (and by `--dry-run` and `alignflow translate`)."""

from __future__ import annotations

from typing import Any

from alignflow.flows.config.lookup import value_at
from alignflow.flows.control.planning import Plan


def notes(cfg: Any, plan: Plan | None = None) -> list[str]:
    """One line per difference that concerns `cfg` (a built-in flow's config) and its run
    `plan`."""
    out = []
    data = value_at(cfg, "data")
    colocate_all = value_at(cfg, "train.colocate_all")
    if plan is not None and plan.colocated and len(plan.roles) > 1 and colocate_all:
        out.append("every role shares one process here (train.colocate_all; OpenRLHF places "
                   "roles on their own GPUs unless colocated): placement only, same results")
    elif plan is not None and plan.colocated and len(plan.roles) > 1 and colocate_all is None:
        out.append("train.colocate_all unset on a machine without GPUs: every role shares one "
                   "process (the CPU default); OpenRLHF (and alignflow on a GPU cluster) gives "
                   "each role GPUs of its own: placement only, same results")
    if data is not None and data.apply_chat_template and data.input_template:
        out.append("data.input_template is not used: a chat template is applied (as in "
                   "OpenRLHF)")
    out += _rl_notes(cfg) + _ckpt_notes(cfg) + _offline_notes(cfg)
    if plan is not None and hasattr(cfg, "plan_notes"):  # the RL flows' (π_old's source)
        out += cfg.plan_notes(plan)
    return out


def _rl_notes(cfg: Any) -> list[str]:
    evaluation, data = value_at(cfg, "eval"), value_at(cfg, "data")
    out = evaluation.notes(data.prompt_dataset, data.prompt_split) \
        if hasattr(evaluation, "notes") and hasattr(data, "prompt_dataset") else []
    reward = value_at(cfg, "reward")
    if value_at(cfg, "algo.dynamic_filtering_enable") and getattr(cfg, "uses_generator", False):
        out.append("algo.dynamic_filtering_enable: with a generator worker, groups outside the "
                   "range are dropped, not replaced by new prompts (OpenRLHF refills the batch)")
    if reward is not None and any(s.endswith(".py") for s in reward.specs):
        out.append("reward_func is called once per batch (OpenRLHF: once per sample), with "
                   "responses decoded without special tokens")
    urls = reward.remote_urls if reward is not None else []
    if len(urls) > 1 and urls[0].endswith(".py"):
        out.append(f"reward.remote_url: only {urls[0]} is used (as OpenRLHF does)")
    return out


def _ckpt_notes(cfg: Any) -> list[str]:
    ckpt = value_at(cfg, "ckpt")
    out = []
    if ckpt is not None and ckpt.max_num == 1:  # artifacts/ckpt_index.py: prune keeps >= 2
        out.append("ckpt.max_num = 1: the checkpoint before the newest is kept too (2 per "
                   "role on disk; OpenRLHF keeps 1): the newest is committed only when its "
                   "task ends, and a crash while it is written resumes from the one before")
    if ckpt is not None and ckpt.path:
        out.append(f"ckpt.path = {ckpt.path}: checkpoints are written to the store (resumable "
                   "with alignflow resume); the path only names the run for ckpt.load_enable")
    return out


def _offline_notes(cfg: Any) -> list[str]:
    evaluation = value_at(cfg, "eval")
    if not hasattr(evaluation, "ratio"):  # RL: eval.steps = -1 never evaluates, as OpenRLHF
        return []
    out = []
    if evaluation.steps == -1 and (evaluation.dataset or evaluation.ratio):
        out.append("eval.steps = -1: alignflow evaluates at the end (OpenRLHF once per epoch)")
    if value_at(cfg, "ds.packing_samples") and not cfg.train_spec().packing:
        out.append(f"ds.packing_samples is not applied in {cfg.KIND}: only sft and csft pack "
                   f"micro-batches here (OpenRLHF packs {cfg.KIND}'s too); its micro-batches "
                   "are padded, with the same loss")
    return out
