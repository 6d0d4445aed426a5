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

from typing import Any

from alignflow.flows.engine import flow
from alignflow.flows.loops.config import IterativeDPOConfig
from alignflow.flows.loops.steps import (
    on,
    policy_reference,
    round_examples,
    run_rounds,
    select_pairs,
    train_round,
)


@flow(name="iterative_dpo")
def iterative_dpo(cfg: IterativeDPOConfig) -> dict:
    def choose(k: str, rollouts: Any, scores: Any, r: int) -> Any:
        return select_pairs.options(key=f"{k}/pairs")(rollouts, scores, r, cfg.margin)

    def learn(k: str, rollouts: Any, pairs: Any, r: int, step: int) -> int:
        data = round_examples.options(key=f"{k}/examples")(rollouts, pairs, r, "dpo")
        ref = on(policy_reference, f"{k}/reference")(data, cfg.reference_micro_batch)
        return train_round(cfg, data, r, step, ref).step

    return run_rounds(cfg, choose, learn, "pairs")
