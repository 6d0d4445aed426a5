"""Drive one attempt of a run: take the lease, run the flow under a `Driver`, record status.

Statuses written here: RUNNING at start; SUCCESSFUL with the output; FAILED with the
one-line error and task key (user error, resumable after a fix); SLEEPING when a
non-blocking driver reaches a sleep/event not yet due; RESUMABLE when interrupted.
A driver killed outright leaves RUNNING, which readers show as RESUMABLE once the lease
expires. CANCELED is written by `cancel` and kept.
"""

from __future__ import annotations

import inspect
import sys
import time
from dataclasses import dataclass
from typing import Any

from alignflow.artifacts.redact import redact
from alignflow.errors import FlowError, TaskFailed
from alignflow.flows.control import rerun
from alignflow.flows.control.driver import Driver, Stopped
from alignflow.flows.control.heartbeat import watch
from alignflow.flows.control.timeline import mark
from alignflow.flows.engine import _DRIVER, Flow
from alignflow.flows.journal import codec, runs
from alignflow.flows.journal.runs import RunState
from alignflow.flows.journal.timers import Suspended


def call_flow(flow: Flow, config: Any) -> Any:
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


def drive(state: RunState, flow: Flow, config: Any, how: Drive, attempt: Any) -> Any:
    """Run (or resume) the run to its end, a failure, or (non-blocking) its next wait;
    `attempt` (`life.Attempt`): rerun_from, block, progress, executor and address."""
    if attempt.rerun_from is not None:
        discard_from(state, attempt.rerun_from)
    _started(state, how, attempt)
    driver = Driver(state, how.executor, block=attempt.block, progress=attempt.progress,
                    lease=how.lease)
    driver.plan = how.plan
    beat = watch(state, state.meta.get("flow") or flow.name, attempt.progress)
    from alignflow.flows.tracking.sink import open_sink  # W&B/TensorBoard only when asked

    sink = open_sink(state, config, driver)
    mark("flow start")
    try:
        return _run_body(state.store, state.run_id, flow, config, driver)
    finally:
        mark("flow end")
        if sink is not None:
            sink.close()
        if attempt.progress is not None:
            attempt.progress.close(driver.outcome)
        if beat is not None:
            beat.stop()


def _started(state: RunState, how: Drive, attempt: Any) -> None:
    runs.update_run(state.store, state.run_id, status=runs.RUNNING, error=None,
                    error_task=None, wake_at=None, waiting_for=None, executor=how.executor.name,
                    address=attempt.address, drivers=state.meta.get("drivers", 0) + 1,
                    resumed=time.time(), **how.record)


def _run_body(store: Any, run_id: str, flow: Flow, config: Any, driver: Driver) -> Any:
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
        _record(store, driver, status=runs.FAILED, error=str(exc), error_task=exc.task_key,
                ended=time.time())
        raise
    except (KeyboardInterrupt, SystemExit) as exc:
        why = "interrupted" if isinstance(exc, KeyboardInterrupt) else f"exited ({exc.code!r})"
        _record(store, driver, status=runs.RESUMABLE, error=f"driver {why}")
        raise
    except Exception as exc:
        line = (str(exc).strip().splitlines() or [""])[0]
        _record(store, driver, status=runs.FAILED, error=f"{type(exc).__name__}: {line}",
                ended=time.time())
        raise
    finally:
        _DRIVER.reset(token)
    _record(store, driver, status=runs.SUCCESSFUL, output=codec.encode(output), ended=time.time())
    return output


def _record(store: Any, driver: Driver, outcome: str | None = None, **fields: Any) -> None:
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


def _write_record(store: Any, driver: Driver, fields: dict[str, Any]) -> None:
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
