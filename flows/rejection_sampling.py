"""Rejection sampling (best-of-n fine-tuning) as a durable loop.

    prompts ← load once
    for round r in 0..R-1:
        rollouts ← generate(policy_r, prompt batch r, n samples each)
        scores   ← score(rollouts)
        best     ← best sample per prompt (reward >= threshold)
        policy_{r+1} ← SFT on best, one task per save_steps chunk
        sync(policy_{r+1} → engine)
    generate + score round R with the final policy (progress), export it

Task keys `round-0001/generate`, `round-0001/train-0002`, ...: a driver killed inside a
round resumes inside it, at the first uncommitted chunk.
"""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.loops_config import RejectionSamplingConfig
from alignflow.flows.loops_steps import (
    declare_host,
    export_model,
    generate_and_score,
    load_prompts,
    on,
    round_key,
    select_best,
    sft_chunk,
    sync_weights,
)


@flow(name="rejection_sampling")
def rejection_sampling(cfg: RejectionSamplingConfig) -> dict:
    prompts = load_prompts.options(key="prompts")(cfg.data, cfg.model.pretrain)
    declare_host(cfg)
    rewards, selected = [], []
    for r in range(cfg.rounds):
        k = round_key(r)
        rollouts, scores = generate_and_score(cfg, prompts, r)
        best = select_best.options(key=f"{k}/select")(rollouts, scores, r, cfg.threshold)
        learned = None
        for c in range(cfg.train.chunks(best.rows)):
            learned = on(sft_chunk, f"{k}/train-{c:04d}")(rollouts, best, r, c, cfg.train)
        if learned is not None:
            on(sync_weights, f"{k}/sync")(learned)
        rewards.append(scores.metrics["reward_mean"])
        selected.append(best.rows)
    if cfg.final_eval:
        _, scores = generate_and_score(cfg, prompts, cfg.rounds)
        rewards.append(scores.metrics["reward_mean"])
    final = on(export_model, "export")()
    return {"rounds": cfg.rounds, "reward_mean": rewards, "selected": selected,
            "model": final["path"]}
