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

from alignflow.flows.campaign.config import CampaignConfig
from alignflow.flows.campaign.gate import beats, prompt_config
from alignflow.flows.campaign.records import Due, Inputs, Policy
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
    policy = Policy(0, start)
    base = evaluate_policy.options(key="gate/eval-initial")(policy, prompts, 0, cfg.gate)
    policy, consumed, history, due = dataclasses.replace(policy, score=base.value), [], [], None
    for r in range(cfg.max_rounds or sys.maxsize):
        k = f"round-{r:04d}"
        when = plan_round.options(key=f"{k}/schedule")(cfg.schedule, r, due)
        sleep(max(0.0, when.due - time.time()), key=f"{k}/sleep")
        row = {"round": r, "due": when.due, "skipped_due_times": when.skipped,
               "policy_in_version": policy.version, "policy_in": policy.path,
               "incumbent_score": policy.score, "metric": cfg.gate.metric}
        if read_control.options(key=f"{k}/control")():
            new, row["status"] = Inputs(), "paused"
        else:
            new = consume_inputs.options(key=f"{k}/inputs")(cfg, consumed, when) \
                if cfg.inputs.source else Inputs()
            row["inputs"] = len(new.files)
            if cfg.inputs.source and cfg.inputs.min_files and not new.files:
                row["status"] = "no_input"
            else:
                policy = _train_and_gate(cfg, k, when, policy, new, prompts, row)
                history.append(row["round_run"])
        row.update(policy_out_version=policy.version, policy_out=policy.path)
        record_round.options(key=f"{k}/record")(row)
        retain.options(key=f"{k}/retain")(cfg.retention.keep_rounds, history, policy)
        consumed, due = consumed + [f.path for f in new.files], when.due
    return {"rounds": cfg.max_rounds, "policy": dataclasses.asdict(policy), "model": policy.path}


def _train_and_gate(cfg: CampaignConfig, k: str, when: Due, policy: Policy, new: Inputs,
                    prompts, row: dict) -> Policy:
    """One round's training run and gate; returns the policy the next round starts from."""
    run = train_round.options(key=f"{k}/run")(cfg, policy, new, when)
    candidate = Policy(policy.version + 1, run.model, round=when.round)
    score = evaluate_policy.options(key=f"{k}/eval")(candidate, prompts, when.round + 1, cfg.gate)
    promoted = beats(score.value, policy.score, cfg.gate)
    row.update(round_run=run.run_id, candidate=run.model, candidate_score=score.value,
               promoted=promoted, eval_iteration=score.iteration,
               status="promoted" if promoted else "refused")
    return dataclasses.replace(candidate, score=score.value) if promoted else policy
