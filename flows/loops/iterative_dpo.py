"""Iterative DPO as a durable loop.

    prompts ← load once
    for round r in 0..R-1:
        rollouts  ← generate(policy_r, prompt batch r, n samples each)
        scores    ← score(rollouts)
        pairs     ← best vs worst per prompt (gap > 0 and >= margin) → preferences
        examples  ← the pairs as preference examples
        reference ← log-probs of the pairs under policy_r (the round's reference), once
        policy_{r+1} ← DPO on examples against reference, one task per save_steps chunk
        sync(policy_{r+1} → engine)
    generate + score round R with the final policy (progress), export it
"""

from __future__ import annotations

from alignflow.flows.engine import expect, flow
from alignflow.flows.loops.config import IterativeDPOConfig
from alignflow.flows.loops.steps import (
    declare_host,
    generate_and_score,
    on,
    policy_reference,
    round_examples,
    round_key,
    select_pairs,
    train_round,
)
from alignflow.flows.rl.shared_steps import (
    export_model,
    load_prompts,
)


@flow(name="iterative_dpo")
def iterative_dpo(cfg: IterativeDPOConfig) -> dict:
    prompts = load_prompts.options(key="prompts")(
        cfg.data, cfg.model.model_name_or_path, cfg.rollout.max_new_tokens)
    declare_host(cfg)
    rewards, pairs_per_round, step = [], [], 0
    expect(cfg.rounds)
    for r in range(cfg.rounds):
        k = round_key(r)
        rollouts, scores = generate_and_score(cfg, prompts, r)
        pairs = select_pairs.options(key=f"{k}/pairs")(rollouts, scores, r, cfg.margin)
        if pairs.rows:
            data = round_examples.options(key=f"{k}/examples")(rollouts, pairs, r, "dpo")
            ref = on(policy_reference, f"{k}/reference")(data, cfg.reference_micro_batch)
            step = train_round(cfg, data, r, step, ref).step
        rewards.append(scores.metrics["reward_mean"])
        pairs_per_round.append(pairs.rows)
    if cfg.final_eval:
        _, scores = generate_and_score(cfg, prompts, cfg.rounds)
        rewards.append(scores.metrics["reward_mean"])
    final = on(export_model, "export")()
    return {"rounds": cfg.rounds, "reward_mean": rewards, "pairs": pairs_per_round,
            "model": final["path"]}
