"""A campaign: rounds of a training flow on a schedule, each gated before it is promoted.

    prompts ← the gate's fixed eval prompts;  score the initial policy on them
    for each round r:
        due ← the next schedule time (the round's identity; no drift)
        durable sleep until due
        if paused: record r as paused
        else:
            files     ← the source's files no earlier round consumed
            candidate ← run the round flow from the current policy on those files
            promote the candidate iff its eval metric beats the current policy's
        record r (lineage row); delete checkpoints of rounds older than `keep_rounds`
"""

from __future__ import annotations

import dataclasses
import sys
import time
from typing import Any

from alignflow.flows.campaign.config import CampaignConfig
from alignflow.flows.campaign.gate import beats, prompt_config
from alignflow.flows.campaign.records import Due, Inputs, Policy, Score
from alignflow.flows.campaign.rounds import initial_policy
from alignflow.flows.campaign.steps import (
    consume_inputs,
    evaluate_policy,
    gate_prompts,
    plan_round,
    read_control,
    record_round,
    retain,
    train_round,
)
from alignflow.flows.engine import flow, sleep


@flow(name="campaign")
def campaign(cfg: CampaignConfig) -> dict:
    start = initial_policy(cfg)
    prompts = gate_prompts.options(key="gate/prompts")(prompt_config(cfg.gate), start)
    incumbent = evaluate_policy.options(key="gate/eval-initial")(Policy(0, start), prompts, 0,
                                                                 cfg.gate)
    policy = Policy(0, start, score=incumbent.of(cfg.gate.metric))
    consumed: list[Any] = []
    history: list[dict[str, Any]] = []
    due = None
    for r in range(cfg.max_rounds or sys.maxsize):
        k = f"round-{r:04d}"
        when = plan_round.options(key=f"{k}/schedule")(cfg.schedule, r, due)
        sleep(max(0.0, when.due - time.time()), key=f"{k}/sleep")
        row = {"round": r, "due": when.due, "skipped_due_times": when.skipped,
               "policy_in_version": policy.version, "policy_in": policy.path,
               "incumbent_score": incumbent.of(cfg.gate.metric), "metric": cfg.gate.metric}
        candidate: tuple[Policy, Score] | None = None
        if read_control.options(key=f"{k}/control")():
            new, row["status"] = Inputs(), "paused"
        else:
            new = consume_inputs.options(key=f"{k}/inputs")(cfg, consumed, when) \
                if cfg.inputs.source else Inputs()
            row["inputs"] = len(new.files)
            if cfg.inputs.source and cfg.inputs.min_files and not new.files:
                row["status"] = "no_input"
            else:
                candidate = _train_and_gate(cfg, k, when, policy, incumbent, new, prompts, row)
                history.append(row["round_run"])
        out = candidate[0] if candidate is not None and row["promoted"] else policy
        row.update(policy_out_version=out.version, policy_out=out.path)
        promoted = record_round.options(key=f"{k}/record")(row)["promoted"]  # a recorded
        if promoted and candidate is not None:  # round's decision stands, whatever the gate
            policy, incumbent = candidate  # says now
        retain.options(key=f"{k}/retain")(cfg.retention.keep_rounds, history, policy)
        consumed, due = consumed + [f.path for f in new.files], when.due
    return {"rounds": cfg.max_rounds, "policy": dataclasses.asdict(policy), "model": policy.path}


def _train_and_gate(cfg: CampaignConfig, k: str, when: Due, policy: Policy, incumbent: Score,
                    new: Inputs, prompts, row: dict) -> tuple[Policy, Score]:
    """One round's training run and gate (by the gate's metric now, on both policies'
    evals); returns the candidate policy and its eval, and fills the round's row."""
    run = train_round.options(key=f"{k}/run")(cfg, policy, new, when)
    score = evaluate_policy.options(key=f"{k}/eval")(
        Policy(policy.version + 1, run.model, round=when.round), prompts, when.round + 1,
        cfg.gate)
    value = score.of(cfg.gate.metric)
    promoted = beats(value, incumbent.of(cfg.gate.metric), cfg.gate)
    row.update(round_run=run.run_id, candidate=run.model, candidate_score=value,
               promoted=promoted, eval_iteration=score.iteration,
               status="promoted" if promoted else "refused")
    return Policy(policy.version + 1, run.model, score=value, round=when.round), score
