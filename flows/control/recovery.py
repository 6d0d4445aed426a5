"""Recovery budgets: how often a run may replace each of its roles before a person must look.

A fault outside user code — a dead worker actor, a dead generation engine, a lost node, a
checkpoint lost with its node, a dead driver under `--supervise` — is recovered without
failing the run: the failed role alone is replaced and re-formed from the newest committed
checkpoint. A role that dies again and again (a bad node, a model that runs out of memory
each time) would loop for ever, so each role has a budget per run
(`$ALIGNFLOW_MAX_RESTARTS`, `--max-restarts`, default 10). The counts live in run.json
(`recoveries`), so a driver restarted by its supervisor goes on counting; a driver a person
starts (`run`, `resume`) starts from zero. A spent budget stops the run (FAILED, resumable
after a fix) with one line naming the role, its count and the last fault. Re-forming waits
only when recoveries follow each other with nothing committed between them (`Budget.pause`).
"""

from __future__ import annotations

import os

from alignflow.artifacts.store import Store
from alignflow.errors import TaskFailed
from alignflow.flows.control.live import backoff
from alignflow.flows.journal import runs

ENV = "ALIGNFLOW_MAX_RESTARTS"
KEEP_ENV = "ALIGNFLOW_KEEP_RECOVERIES"  # set by the supervisor for the drivers it restarts
DEFAULT = 10
# faults that mean a process or node is gone (Ray's names; a worker group stopped after a
# rank died answers ConnectionError; engines restarted answer EngineError): the role is
# replaced. Other system faults (a full disk, a store outage) fail the run resumable.
RECOVERABLE = frozenset({"RayActorError", "ActorDiedError", "ActorUnavailableError",
                         "WorkerCrashedError", "NodeDiedError", "ObjectLostError",
                         "OwnerDiedError", "ObjectFetchTimedOutError", "ConnectionError",
                         "EngineError"})


def limit() -> int:
    """Recoveries each role may have in one run ($ALIGNFLOW_MAX_RESTARTS, default 10)."""
    return int(os.environ.get(ENV, DEFAULT))


def lost_outside_a_task(exc: BaseException) -> bool:
    """Whether an error raised outside any task (a worker group started, restored or
    replaced) means a lost process or node, or engines Ray restarted (the Ray error
    wraps the `EngineError`)."""
    from alignflow.flows.ray.executors import is_transient

    return is_transient(exc) or type(getattr(exc, "cause", None)).__name__ == "EngineError"


def recoverable(exc: BaseException) -> bool:
    """Whether a failed task's fault was a lost process or node (`TaskFailed.fault`)."""
    return getattr(exc, "kind", "") == "system" and getattr(exc, "fault", "") in RECOVERABLE


def role_of(worker: str | None, err_type: str) -> str:
    """The role a fault is charged to: the engines of a worker, its worker group, or the
    run's plain tasks."""
    if err_type == "EngineError":
        return f"generation engines of {worker!r}" if worker else "generation engines"
    return f"worker group {worker!r}" if worker else "tasks"


def spent_line(role: str, count: int, budget: int, fault: str, run_id: str) -> str:
    """The one line a spent budget is reported with."""
    return (f"{role} needed recovery {count} times, over its budget of {budget} "
            f"(--max-restarts, ${ENV}); last fault: {fault}; the run stops here: fix the "
            f"cause, then `alignflow resume {run_id}`")


class Budget:
    """The run's recovery counts by role, kept in run.json as they change."""

    def __init__(self, store: Store, run_id: str, *, keep: bool | None = None) -> None:
        self.store, self.run_id, self.limit = store, run_id, limit()
        keep = bool(os.environ.get(KEEP_ENV)) if keep is None else keep
        meta = runs.read_run(store, run_id)
        self.counts: dict[str, int] = dict(meta.get("recoveries") or {}) if keep else {}
        self.stalled = 0  # recoveries in a row with nothing committed between them
        if not keep and meta.get("recoveries"):
            runs.update_run(store, run_id, recoveries={})

    def charge(self, role: str, task_key: str, fault: str) -> int:
        """Count one recovery of `role`; raise `TaskFailed` (one line) when it is one too
        many. Returns the role's count."""
        count = self.counts.get(role, 0) + 1
        self.counts[role] = count
        runs.update_run(self.store, self.run_id, recoveries=dict(self.counts))
        if count > self.limit:
            raise TaskFailed(task_key, spent_line(role, count, self.limit, fault, self.run_id))
        return count

    def pause(self, progressed: bool) -> float:
        """Seconds to wait before re-forming the run: none when it committed something
        since the last recovery (a steady rain of faults is not a crash loop), and from the
        second recovery in a row with nothing committed, doubling (a role that cannot
        start: give what it waits for time)."""
        self.stalled = 0 if progressed else self.stalled + 1
        return backoff(self.stalled - 1) if self.stalled > 1 else 0.0

    def charge_fault(self, err: dict, worker: str | None, task_key: str) -> int:
        """A role replaced (its process died, or its engines were restarted) after the
        error record `err` of one of its tasks."""
        from alignflow.artifacts.redact import redact

        return self.charge(role_of(worker, err["type"]), task_key,
                           redact(f"{err['type']}: {err['message']}"))
