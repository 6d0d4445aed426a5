"""Iterative DPO as a durable loop.

    prompts ← load once
    for round r in 0..R-1:
        rollouts  ← generate(policy_r, prompt batch r, n samples each)
        scores    ← score(rollouts)
        pairs     ← best vs worst per prompt (gap > 0 and >= margin) → preferences
        reference ← log-probs of the pairs under policy_r (the round's reference), once
        policy_{r+1} ← DPO on pairs against reference, one task per save_steps chunk
        sync(policy_{r+1} → engine)
    generate + score round R with the final policy (progress), export it
"""

from __future__ import annotations

from alignflow.flows.engine import flow
from alignflow.flows.loops_config import IterativeDPOConfig
from alignflow.flows.loops_steps import (
    declare_host,
    dpo_chunk,
    export_model,
    generate_and_score,
    load_prompts,
    on,
    pair_reference,
    round_key,
    select_pairs,
    sync_weights,
)


@flow(name="iterative_dpo")
def iterative_dpo(cfg: IterativeDPOConfig) -> dict:
    prompts = load_prompts.options(key="prompts")(cfg.data, cfg.model.pretrain)
    declare_host(cfg)
    rewards, pairs_per_round = [], []
    for r in range(cfg.rounds):
        k = round_key(r)
        rollouts, scores = generate_and_score(cfg, prompts, r)
        pairs = select_pairs.options(key=f"{k}/pairs")(rollouts, scores, r, cfg.margin)
        learned = None
        if pairs.rows:
            ref = on(pair_reference, f"{k}/reference")(rollouts, pairs, r,
                                                        cfg.reference_micro_batch)
            for c in range(cfg.train.chunks(pairs.rows)):
                learned = on(dpo_chunk, f"{k}/train-{c:04d}")(rollouts, pairs, ref, r, c,
                                                              cfg.train, cfg.dpo)
        if learned is not None:
            on(sync_weights, f"{k}/sync")(learned)
        rewards.append(scores.metrics["reward_mean"])
        pairs_per_round.append(pairs.rows)
    if cfg.final_eval:
        _, scores = generate_and_score(cfg, prompts, cfg.rounds)
        rewards.append(scores.metrics["reward_mean"])
    final = on(export_model, "export")()
    return {"rounds": cfg.rounds, "reward_mean": rewards, "pairs": pairs_per_round,
            "model": final["path"]}
