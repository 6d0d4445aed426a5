"""Drive one attempt of a run: take the lease, run the flow under a `Driver`, record status.

Statuses written here: RUNNING at start; SUCCESSFUL with the output; FAILED with the
one-line error and task key (user error, resumable after a fix); SLEEPING when a
non-blocking driver reaches a sleep/event not yet due; RESUMABLE when interrupted.
A driver killed outright leaves RUNNING, which readers show as RESUMABLE once the lease
expires. CANCELED is written by `cancel` and kept.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from alignflow.artifacts.redact import redact
from alignflow.artifacts.store import Store
from alignflow.errors import FlowError, TaskFailed
from alignflow.flows.control import rerun
from alignflow.flows.control.driver import Driver, Stopped
from alignflow.flows.control.heartbeat import watch
from alignflow.flows.control.recovery import Budget, lost_outside_a_task, recoverable, role_of
from alignflow.flows.engine import _DRIVER, Flow
from alignflow.flows.journal import codec, runs
from alignflow.flows.journal.runs import RunState
from alignflow.flows.journal.timers import Suspended
from alignflow.flows.ray import watch as ray_watch
from alignflow.flows.seams import FlowConfig
from alignflow.flows.trust import signing
from alignflow.timeline import mark


def call_flow(flow: Flow, config: FlowConfig) -> Any:
    """Call the flow body with its config (flows without parameters take none)."""
    if config is None and not inspect.signature(flow.fn).parameters:
        return flow.fn()
    return flow.fn(config)


def warm_modules(flow: Flow) -> tuple[str, ...]:
    """The flow's module when workers can import it by name (not a file loaded by path)."""
    name = flow.fn.__module__
    return () if name == "__main__" or name.startswith("alignflow_user_") else (name,)


def discard_from(state: RunState, task_key: str) -> list[str]:
    """Delete the manifest of `task_key` and every manifest committed after it, once it is
    sure the workers can restore what the tasks before it committed (`rerun.py`)."""
    journal = state.manifests
    if task_key not in journal:
        raise FlowError(f"--rerun-from {task_key!r}: run {state.run_id!r} has no committed "
                        "task with that key (see `alignflow status RUN_ID`)")
    rerun.check(state.store, state.run_id, journal, task_key)
    cut = journal[task_key].get("seq", 0)
    gone = [k for k, m in journal.items() if m.get("seq", 0) >= cut]
    for key in reversed(gone):
        state.store.delete(runs.manifest_path(state.run_id, key))
        del journal[key]
    return gone


@dataclass(frozen=True)
class Drive:
    """What the run's life hands the drive: the executor on the joined cluster, the lease
    held, the settled plan, and the run.json fields to record as the drive starts."""

    executor: Any
    lease: Any
    plan: Any
    record: dict


def drive(state: RunState, flow: Flow, config: FlowConfig, how: Drive, attempt: Any) -> Any:
    """Run (or resume) the run to its end, a failure, or (non-blocking) its next wait;
    `attempt` (`life.Attempt`): rerun_from, block, progress, executor and address. A fault
    that replaced a role re-forms the run in this process (`Recover`), on the same lease."""
    if attempt.rerun_from is not None:
        discard_from(state, attempt.rerun_from)
    _started(state, how, attempt)
    budget = Budget(state.store, state.run_id)
    beat = watch(state, state.meta.get("flow") or flow.name, attempt.progress)
    driver = sink = None
    mark("flow start")
    try:
        while True:  # a recovery re-forms the run from its journal, in this process
            if sink is not None:
                sink.close()
            driver, sink = _new_driver(state, config, how, attempt, budget, driver)
            ray_watch.on_exit(_resumable_record(state.store, driver))  # Ray's death ends it
            try:
                return _run_body(state.store, state.run_id, flow, config, driver)
            except Recover as rec:
                _replace(driver, rec.worker)
    finally:
        mark("flow end")
        if sink is not None:
            sink.close()
        if attempt.progress is not None:
            attempt.progress.close(driver.outcome if driver is not None else None)
        if beat is not None:
            beat.stop()


def _new_driver(state: RunState, config: FlowConfig, how: Drive, attempt: Any, budget: Budget,
                previous: Driver | None) -> tuple[Driver, Any]:
    """A driver on the journal as it stands (after a recovery: what the last one committed),
    and its live-metrics sink."""
    from alignflow.flows.tracking.sink import open_sink  # W&B/TensorBoard only when asked

    if previous is not None:
        state = dataclasses.replace(state, manifests=dict(previous.manifests))
    driver = Driver(state, how.executor, block=attempt.block, progress=attempt.progress,
                    lease=how.lease)
    driver.plan, driver.budget = how.plan, budget
    return driver, open_sink(state, config, driver)


def _started(state: RunState, how: Drive, attempt: Any) -> None:
    """run.json as the drive starts, signed by this machine: what it records was named or
    confirmed here (`flows/trust/`), so the next resume may take its word."""
    fields = dict(status=runs.RUNNING, error=None, error_task=None, wake_at=None,
                  waiting_for=None, executor=how.executor.name, address=attempt.address,
                  drivers=state.meta.get("drivers", 0) + 1, resumed=time.time(), **how.record)
    fields[signing.FIELD] = signing.sign({**state.meta, **fields})
    runs.update_run(state.store, state.run_id, **fields)


def _run_body(store: Store, run_id: str, flow: Flow, config: FlowConfig, driver: Driver) -> Any:
    token = _DRIVER.set(driver)
    try:
        output = call_flow(flow, config)
        driver.finish()
    except Suspended as sus:
        _record(store, driver, status=runs.SLEEPING, wake_at=sus.wake_at,
                waiting_for=sus.waiting_for)
        return None
    except Stopped:
        _record(store, driver, outcome=runs.CANCELED)  # status stays (CANCELED or the new driver's)
        raise FlowError(f"run {run_id!r} stopped: canceled or taken over by another driver") from None
    except TaskFailed as exc:
        exc = _recover_or(driver, exc)  # raises Recover when the run can go on
        _record(store, driver, status=runs.FAILED, error=str(exc), error_task=exc.task_key,
                ended=time.time())
        raise exc from None
    except (KeyboardInterrupt, SystemExit) as exc:
        why = ray_watch.interrupted() if isinstance(exc, KeyboardInterrupt) else \
            f"exited ({exc.code!r})"
        _record(store, driver, status=runs.RESUMABLE, error=f"driver {why}")
        raise
    except Exception as exc:
        if _ray_node_lost(exc):  # as a Ctrl-C from the watch: resumable, one line
            _resumable_record(store, driver)()
            raise KeyboardInterrupt from exc
        cause = getattr(exc, "cause", None)  # a Ray error wraps the real one
        if lost_outside_a_task(exc):
            # a worker group or its engines lost while it started, restored or was rebuilt
            why = (str(cause or exc).strip().splitlines() or [""])[0]
            spent = _recover_or(driver, _fault("worker-start", cause or exc, why))
            _record(store, driver, status=runs.FAILED, error=str(spent), ended=time.time())
            raise spent from exc
        line = (str(exc).strip().splitlines() or [""])[0]
        _record(store, driver, status=runs.FAILED, error=f"{type(exc).__name__}: {line}", ended=time.time())
        raise
    finally:
        _DRIVER.reset(token)
    _record(store, driver, status=runs.SUCCESSFUL, output=codec.encode(output), ended=time.time())
    return output


def _resumable_record(store: Store, driver: Driver) -> Callable[[], None]:
    """The record of a driver whose Ray node died (written by the runner, or by the Ray
    watch before it ends the process outright)."""
    def record() -> None:
        _record(store, driver, status=runs.RESUMABLE, error=f"driver {ray_watch.interrupted()}")
    return record


def _ray_node_lost(exc: Exception) -> bool:
    """This Ray error is the node dying (`ray_watch.settle`); the watch's own interrupt may
    land while it is asked."""
    try:
        return ray_watch.settle(exc) is not None
    except KeyboardInterrupt:
        return True


class Recover(Exception):
    """A fault outside user code outlived its task's retries (or took a checkpoint with
    it): the run is re-formed from its journal and newest checkpoints, `worker` replaced."""

    def __init__(self, worker: str | None) -> None:
        super().__init__(worker)
        self.worker = worker


def _fault(key: str, exc: BaseException, line: str) -> TaskFailed:
    """A Ray fault outside any task, as the failure `_recover_or` judges."""
    return TaskFailed(key, f"{type(exc).__name__}: {line}", kind="system",
                      fault=type(exc).__name__)


def _recover_or(driver: Driver, exc: TaskFailed) -> TaskFailed:
    """Raise `Recover` for a system fault while its role's budget lasts; else the error
    the run fails with (the fault itself, or the spent budget's line)."""
    if not recoverable(exc) or driver.budget is None:
        return exc
    worker = driver.workers_of.get(exc.task_key)
    role = role_of(worker, getattr(exc, "fault", "")) if exc.task_key != "worker-start" \
        else "worker group start-up"
    try:
        count = driver.budget.charge(role, exc.task_key, exc.error)
    except TaskFailed as spent:
        return spent
    if driver.progress is not None:
        driver.progress.log(f"recovering ({role}, {count} of {driver.budget.limit}): the "
                            "run is re-formed from its newest checkpoints after "
                            f"{redact(str(exc))}")
    wait = driver.budget.pause(progressed=driver.seq > driver.first_seq)
    if wait:
        time.sleep(wait)
    raise Recover(worker) from exc


def _replace(driver: Driver, worker: str | None) -> None:
    """Replace the failed worker group (its process or node may be gone); the others stay,
    and each restores its newest checkpoint before its next task. A group with no committed
    checkpoint that ran tasks since has nothing to go back to: it is replaced too."""
    driver.queue.items.clear()
    ran = set(driver.workers_of.values())
    for name, (factory, options) in driver.groups.items():
        if name == worker or (name in ran and name not in driver.latest_ckpt):
            driver.executor.restart_worker(name, factory, options, driver.run_id)


def _record(store: Store, driver: Driver, outcome: str | None = None, **fields: Any) -> None:
    """Write the attempt's outcome to run.json (error texts redacted), never over a CANCELED
    status; `driver.outcome` is what the progress display reports. When an attempt ends in
    an error and the store cannot take the record either (a full disk, an outage), that is
    said on stderr and the first error is the one raised; run.json keeps RUNNING, which
    readers show as RESUMABLE once the lease is released."""
    driver.outcome = outcome or fields.get("status")
    if fields.get("error"):
        fields["error"] = redact(fields["error"])
    try:
        _write_record(store, driver, fields)
    except OSError as exc:
        if driver.outcome == runs.SUCCESSFUL:
            raise
        print(f"alignflow: run {driver.run_id}: could not record its outcome "
              f"({driver.outcome}) in run.json: {redact(str(exc))}", file=sys.stderr)


def _write_record(store: Store, driver: Driver, fields: dict[str, Any]) -> None:
    meta = runs.read_run(store, driver.run_id)
    if meta.get("status") == runs.CANCELED:
        fields.pop("status", None)
    rerun = {k for k, m in driver.manifests.items() if m.get("seq", 0) >= driver.first_seq}
    changed = sorted((set(meta.get("code_changed") or []) - rerun) | set(driver.code_changed))
    since = meta.get("resumed") or meta.get("created") or time.time()
    active = float(meta.get("active") or 0.0) + max(0.0, time.time() - since)  # driven time:
    runs.update_run(store, driver.run_id, code_changed=changed, replayed=driver.replayed,
                    ran=driver.ran, active=active, **fields)  # not while it sat interrupted
    if driver.ran:
        runs.write_snapshot(store, driver.run_id, driver.manifests)
