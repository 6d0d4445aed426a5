"""A campaign's steps as journalled tasks: schedule, control, inputs, round run, gate eval,
the round's lineage row, and retention. Each reads the store and commits what it decided,
so a restarted driver replays the decisions instead of taking them again."""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from alignflow.artifacts.lineage import ROUNDS
from alignflow.artifacts.scope import current_scope
from alignflow.flows.campaign import control, inputs
from alignflow.flows.campaign.config import CampaignConfig
from alignflow.flows.campaign.models import policy_folder
from alignflow.flows.campaign.records import Due, Inputs, Policy, RoundRun
from alignflow.flows.campaign.rounds import round_config, round_run_id, run_round
from alignflow.flows.campaign.schedule import ScheduleConfig
from alignflow.flows.engine import task
from alignflow.flows.journal import runs

# The bodies run where models load; the driver names them (`flows/lazyref.py`).
gate_prompts = task(version=1)("alignflow.tasks.steps.prompts:load_prompts")
evaluate_policy = task(version=1)("alignflow.flows.campaign.evaluation:evaluate")


@task(version=1)
def plan_round(schedule: ScheduleConfig, round_: int, previous: float | None) -> Due:
    """Round `round_`'s due time: the first schedule time, or the one after the previous."""
    scope = current_scope()
    if previous is None:
        return Due(round_, schedule.first(runs.read_run(scope.store, scope.run_id)["created"]))
    due, skipped = schedule.next_due(previous, time.time())
    return Due(round_, due, skipped)


@task(version=1)
def read_control() -> bool:
    """Whether the campaign is paused now (read once per due round, then journalled)."""
    scope = current_scope()
    return control.is_paused(scope.store, scope.run_id)


@task(version=1)
def consume_inputs(cfg: CampaignConfig, consumed: list[str], when: Due) -> Inputs:
    """The source's files no earlier round consumed (none if fewer than min_files)."""
    if cfg.inputs.source is None:  # a campaign without a source consumes nothing
        return Inputs()
    new = inputs.new_files(cfg.inputs.source, cfg.inputs.pattern, consumed)
    if len(new) < cfg.inputs.min_files:
        return Inputs()
    return inputs.record(new, when.round, when.due,
                         round_run_id(current_scope().run_id, when.due))


@task(version=1)
def train_round(cfg: CampaignConfig, policy: Policy, new: Inputs, when: Due) -> RoundRun:
    """Run (or resume) the round's run from `policy` on the round's new files."""
    scope = current_scope()
    meta = runs.read_run(scope.store, scope.run_id)
    config = round_config(cfg, policy_folder(scope.store, policy), new)
    return run_round(cfg, round_run_id(scope.run_id, when.due), config, store=scope.store,
                     seed=scope.seed, parent=scope.run_id, address=meta.get("address"))


@task(version=1)
def record_round(row: dict[str, Any]) -> dict[str, Any]:
    """Commit the round's lineage row (`campaign_rounds`); returns it for `campaign status`."""
    scope = current_scope()
    full = {name: row.get(name) for name in ROUNDS.arrow_schema.names}
    full.update(run_id=scope.run_id, task_key=scope.task_key, ts=time.time())
    scope.write(ROUNDS, pa.Table.from_pylist([full], schema=ROUNDS.arrow_schema))
    return full


@task(version=1)
def retain(keep: int, history: list[str], current: Policy) -> list[str]:
    """Delete checkpoints of round runs older than the last `keep` (their exported model
    too, unless it is the current policy's); returns the folders deleted."""
    store, gone = current_scope().store, []
    for run_id in history[:-keep] if keep < len(history) else []:
        folders = [f"runs/{run_id}/checkpoints"]
        if not current.path.startswith(f"runs/{run_id}/"):
            folders.append(f"runs/{run_id}/final")
        for folder in folders:
            if store.list(folder):
                store.delete(folder, recursive=True)
                gone.append(folder)
    return gone
