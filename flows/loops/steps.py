"""The loop steps as journalled tasks, and the one model host the loops declare.

The host holds the policy (trainer + generation engine) and the reward sources. A round's
selection becomes training examples, which train through the offline flows' step (the
round's DPO reference is the policy itself, scored once before the round trains).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from alignflow.flows.control import planning
from alignflow.flows.engine import expect, task
from alignflow.flows.loops.config import LoopConfig
from alignflow.flows.offline.steps import make_plan, train_steps
from alignflow.flows.ray.workers import plan_group
from alignflow.flows.rl.shared_steps import (
    MODEL_HOST,
    export_model,
    generate_rollouts,
    load_prompts,
    score_rollouts,
    sync_weights,
)
from alignflow.tasks.offline.records import OfflineData, ReferenceOutput, TrainOutput
from alignflow.tasks.plan.placement import ALL_IN_ONE
from alignflow.tasks.steps.host_spec import HostSpec

HOST = ALL_IN_ONE

select_best = task(version=1)("alignflow.tasks.loops.select:select_best")
select_pairs = task(version=1)("alignflow.tasks.loops.select:select_pairs")
round_examples = task(version=1)("alignflow.tasks.loops.examples:round_examples")
policy_reference = task(version=1)("alignflow.tasks.offline.reference:policy_reference")


def declare_host(cfg: LoopConfig) -> str:
    """The plan's one worker group, holding the policy and the rewards; returns its name."""
    plan = planning.current(cfg)
    plan.check_fits()
    host = plan.host(HOST)
    spec = HostSpec(plan=host, engines=plan.engines_of(host), sampled_by=plan.generation.kind,
                    pretrain=cfg.model.model_name_or_path, dtype=cfg.ds.param_dtype,
                    rewards=cfg.reward, micro_rollout_batch_size=cfg.rollout.micro_batch_size,
                    num_threads=cfg.num_threads, keep_checkpoints=cfg.ckpt.max_num,
                    offload=("reward",) if cfg.reward.offload else (),
                    attn_implementation=cfg.ds.attn_implementation)
    plan_group(host, functools.partial(MODEL_HOST, spec))
    return HOST


def on(step, key: str):
    """`step` bound to the loop host and a task key."""
    return step.options(worker=HOST, key=key)


def round_key(round_: int) -> str:
    return f"round-{round_:04d}"


def generate_and_score(cfg: LoopConfig, prompts_out, round_: int):
    """Round `round_`'s rollouts and their scores."""
    k = round_key(round_)
    rollouts = on(generate_rollouts, f"{k}/generate")(prompts_out, round_, cfg.rollout,
                                                      round_=round_, max_len=cfg.data.max_len)
    scores = on(score_rollouts, f"{k}/score")(rollouts, round_)
    return rollouts, scores


def train_round(cfg: LoopConfig, data: OfflineData, round_: int, step: int,
                ref: ReferenceOutput | None = None) -> TrainOutput:
    """The round's optimizer steps (one task per `save_steps` chunk), continuing the one
    optimizer and LR schedule at trainer step `step`; then the engine gets the new policy."""
    k = round_key(round_)
    plan = make_plan.options(key=f"{k}/plan")(
        data.train_rows, cfg.train.batch_size, cfg.train.max_epochs, cfg.ckpt.save_steps,
        False, None, step)
    outs = [on(train_steps, f"{k}/train-{c:04d}")(data, ref, None, c, plan, cfg.train_spec())
            for c in range(plan.chunks)]
    out = outs[-1]  # a plan has at least one chunk
    on(sync_weights, f"{k}/sync")(out.checkpoint, round_ + 1)
    return out


def run_rounds(cfg: LoopConfig, choose: Callable, learn: Callable, chosen_key: str) -> dict:
    """The loop both loop flows run: prompts once; per round generate → score →
    `choose(key, rollouts, scores, round)` (the round's selection) → when it chose rows,
    `learn(key, rollouts, selection, round, step)` (the trainer's step after it); a last
    evaluation round when asked; the export. The flow's output, the rows chosen per round
    under `chosen_key`."""
    prompts = load_prompts.options(key="prompts")(
        cfg.data, cfg.model.model_name_or_path, cfg.rollout.max_new_tokens)
    declare_host(cfg)
    rewards, chosen, step = [], [], 0
    expect(cfg.rounds)
    for r in range(cfg.rounds):
        k = round_key(r)
        rollouts, scores = generate_and_score(cfg, prompts, r)
        picked = choose(k, rollouts, scores, r)
        if picked.rows:
            step = learn(k, rollouts, picked, r, step)
        rewards.append(scores.metrics["reward_mean"])
        chosen.append(picked.rows)
    if cfg.final_eval:
        _, scores = generate_and_score(cfg, prompts, cfg.rounds)
        rewards.append(scores.metrics["reward_mean"])
    final = on(export_model, "export")()
    return {"rounds": cfg.rounds, "reward_mean": rewards, chosen_key: chosen,
            "model": final["path"]}
