"""A checkpoint lost with its process, done again in place of re-forming the run.

A task that trains (a learn) returns at once and writes its checkpoint in the background;
the flow has already used its output (the next generate ran from its weights) when the
worker's process or node dies inside that write. The task's commit is then lost. Re-forming
the whole run from its journal would also redo every task the flow ran since. Instead the
worker is replaced, restores its newest committed checkpoint, and runs again — in their
order, with their seeds and inputs — the queued tasks of that worker that carry a
checkpoint; each is then committed with the output the flow already used and the files its
new attempt wrote. Runs are seeded by run and task key, so the new attempt's weights are
the lost ones bitwise (CPU; what the chaos benchmark checks by sha256). When anything in
this fails, the run is re-formed as before (`runner.py`'s `Recover`).
"""

from __future__ import annotations

from typing import Any

from alignflow.artifacts.redact import redact
from alignflow.errors import TaskFailed
from alignflow.flows.control.recovery import lost_outside_a_task, recoverable, role_of
from alignflow.timeline import mark


def redo_lost(driver: Any, failed: TaskFailed) -> bool:
    """Replace the worker whose background write `failed` and run its queued checkpointed
    tasks again; False when this cannot be done (the caller re-forms the run)."""
    worker = driver.workers_of.get(failed.task_key)
    if worker is None or driver.budget is None or not recoverable(failed):
        return False
    role = role_of(worker, failed.fault)
    count = driver.budget.charge(role, failed.task_key, failed.error)  # spent: raises
    again = [i for i, (fut, fields, handle) in enumerate(driver.queue.items)
             if fut.task.opts.worker == worker and (handle is not None or fields.get("checkpoint"))]
    if driver.progress is not None:
        driver.progress.log(f"recovering ({role}, {count} of {driver.budget.limit}): "
                            f"{redact(failed.error)}; the worker is replaced and runs "
                            f"{len(again)} task(s) again from its previous checkpoint")
    mark(f"redo {failed.task_key} {len(again)}")
    try:
        driver.replace_worker(worker)
        for i in again:
            fut, fields, _ = driver.queue.items[i]
            driver.queue.items[i] = _run_again(driver, fut, fields)
    except Exception as exc:  # another fault on the way: the run is re-formed
        if not lost_outside_a_task(exc):
            raise
        return False
    return True


def _run_again(driver: Any, fut: Any, fields: dict) -> tuple[Any, dict, Any]:
    """A new attempt of `fut` on the replaced worker: the queue entry it commits through."""
    fut.attempt += 1
    res = driver.launch(fut).wait()
    if res["error"] is not None:
        raise _Lost(f"{fut.key} failed when run again: {res['error']['type']}")
    handle = driver.executor.durable(fut.task.opts.worker, res["durable"]) \
        if res.get("durable") else None
    return fut, dict(fields, artifacts=res["artifacts"], attempts=fut.attempt), handle


class _Lost(ConnectionError):
    """The attempt run again did not finish: treated as one more fault (the run re-forms)."""
