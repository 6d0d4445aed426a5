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

from typing import Any

from alignflow.flows.engine import flow
from alignflow.flows.loops.config import RejectionSamplingConfig
from alignflow.flows.loops.steps import round_examples, run_rounds, select_best, train_round


@flow(name="rejection_sampling")
def rejection_sampling(cfg: RejectionSamplingConfig) -> dict:
    def choose(k: str, rollouts: Any, scores: Any, r: int) -> Any:
        return select_best.options(key=f"{k}/select")(rollouts, scores, r, cfg.threshold)

    def learn(k: str, rollouts: Any, best: Any, r: int, step: int) -> int:
        data = round_examples.options(key=f"{k}/examples")(rollouts, best, r, "sft")
        return train_round(cfg, data, r, step).step

    return run_rounds(cfg, choose, learn, "selected")
