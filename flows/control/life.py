"""A run's life, one way through: take the lease → read the run once → admit what it
names → join the cluster → settle its config and plan there → drive the flow → record the
outcome. Each step is one room (`flows/journal/lease.py`, `flows/journal/runs.py`,
`flows/trust/admit.py`, `flows/ray/executors.py`, `reconfigure.py`, `planning.py`,
`runner.py`), handed the run's state and never calling back up; what a step decides to
record comes back here and is written once, as the drive starts (`runner.Drive.record`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from alignflow.artifacts import usercode
from alignflow.artifacts.store import Store
from alignflow.flows import trust
from alignflow.flows.control import planning, reconfigure, runner
from alignflow.flows.engine import Flow
from alignflow.flows.journal.lease import Lease
from alignflow.flows.journal.runs import new_state, read_state
from alignflow.flows.ray.executors import joined
from alignflow.flows.seams import FlowConfig, ProgressSink
from alignflow.flows.trust.admit import Given, admit


@dataclass(frozen=True)
class Attempt:
    """How this drive runs: where (executor, address), whether it takes over a live
    lease, blocks through waits, re-runs from a task, where progress goes, and whether a
    finished run gives its output (`ckpt.load_enable`) instead of being refused."""

    executor: str | None = None
    address: str | None = None
    force: bool = False
    block: bool = True
    rerun_from: str | None = None
    progress: ProgressSink | None = None
    finished_output: bool = False


def start(store: Store, meta: dict, flow: Flow, config: FlowConfig, how: Attempt) -> Any:
    """Drive a run whose run.json was just created (what it names already admitted)."""
    with Lease(store, meta["run_id"]).acquire() as lease:
        state = new_state(store, meta)
        kind = how.executor or meta["executor"]  # the executor run.json records, resolved
        with joined(kind, how.address, runner.warm_modules(flow), store) as executor:
            plan, planned = planning.settle(state, config)
            drive = runner.Drive(executor, lease, plan, planned)
            return runner.drive(state, flow, config, drive, how)


def resume(store: Store, run_id: str, given: Given, how: Attempt) -> Any:
    """Continue a stored run with the current code, replaying what it committed."""
    with Lease(store, run_id).acquire(force=how.force) as lease:
        state = read_state(store, run_id, rerun=how.rerun_from is not None,
                           finished_ok=how.finished_output)
        admitted = admit(state, given)
        if state.finished and how.rerun_from is None:
            return reconfigure.finished_output(state, admitted)
        kind = how.executor or state.meta.get("executor") or "ray"
        with (usercode.allowing(admitted.allowed), trust.in_force(admitted.sayso),
              joined(kind, how.address, runner.warm_modules(admitted.flow), store) as executor):
            config, followed = reconfigure.follow(state, admitted.stored, admitted.config)
            plan, planned = planning.settle(state, config)
            drive = runner.Drive(executor, lease, plan, admitted.record | followed | planned)
            return runner.drive(state, admitted.flow, config, drive, how)
