"""Rejection sampling (best-of-n fine-tuning) as a durable loop.

    prompts ← load once
    for round r in 0..R-1:
        rollouts ← generate(policy_r, prompt batch r, n samples each)
        scores   ← score(rollouts)
        best     ← best sample per prompt (reward >= threshold)
        examples ← best samples as SFT examples (loss on the response)
        policy_{r+1} ← SFT on examples, one task per save_steps chunk
        sync(policy_{r+1} → engine)
    generate + score round R with the final policy (progress), export it

Task keys `round-0001/generate`, `round-0001/train-0002`, ...: a driver killed inside a
round resumes inside it, at the first uncommitted chunk.
"""

from __future__ import annotations

from alignflow.flows.engine import expect, flow
from alignflow.flows.loops.config import RejectionSamplingConfig
from alignflow.flows.loops.steps import (
    declare_host,
    generate_and_score,
    on,
    round_examples,
    round_key,
    select_best,
    train_round,
)
from alignflow.flows.rl.shared_steps import (
    export_model,
    load_prompts,
)


@flow(name="rejection_sampling")
def rejection_sampling(cfg: RejectionSamplingConfig) -> dict:
    prompts = load_prompts.options(key="prompts")(
        cfg.data, cfg.model.model_name_or_path, cfg.rollout.max_new_tokens)
    declare_host(cfg)
    rewards, selected, step = [], [], 0
    expect(cfg.rounds)
    for r in range(cfg.rounds):
        k = round_key(r)
        rollouts, scores = generate_and_score(cfg, prompts, r)
        best = select_best.options(key=f"{k}/select")(rollouts, scores, r, cfg.threshold)
        if best.rows:
            data = round_examples.options(key=f"{k}/examples")(rollouts, best, r, "sft")
            step = train_round(cfg, data, r, step).step
        rewards.append(scores.metrics["reward_mean"])
        selected.append(best.rows)
    if cfg.final_eval:
        _, scores = generate_and_score(cfg, prompts, cfg.rounds)
        rewards.append(scores.metrics["reward_mean"])
    final = on(export_model, "export")()
    return {"rounds": cfg.rounds, "reward_mean": rewards, "selected": selected,
            "model": final["path"]}
