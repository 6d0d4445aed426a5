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
from typing import Any

from alignflow.artifacts.redact import redact
from alignflow.errors import ConfigError, FlowError, TaskFailed
from alignflow.flows import codec, planning, reconfigure, rerun, runs
from alignflow.flows.driver import Driver, Stopped
from alignflow.flows.engine import _DRIVER, Flow
from alignflow.flows.executors import make_executor
from alignflow.flows.heartbeat import Heartbeat
from alignflow.flows.lease import Lease
from alignflow.flows.timeline import mark
from alignflow.flows.timers import Suspended


def call_flow(flow: Flow, config: Any) -> Any:
    """Call the flow body with its config (flows without parameters take none)."""
    if config is None and not inspect.signature(flow.fn).parameters:
        return flow.fn()
    return flow.fn(config)


def warm_modules(flow: Flow) -> tuple[str, ...]:
    """The flow's module when workers can import it by name (not a file loaded by path)."""
    name = flow.fn.__module__
    return () if name == "__main__" or name.startswith("alignflow_user_") else (name,)


def discard_from(store: Any, run_id: str, task_key: str) -> list[str]:
    """Delete the manifest of `task_key` and every manifest committed after it, once it is
    sure the workers can restore what the tasks before it committed (`rerun.py`)."""
    journal = runs.read_manifests(store, run_id)
    if task_key not in journal:
        raise FlowError(f"--rerun-from {task_key!r}: run {run_id!r} has no committed task with "
                        "that key (see `alignflow status RUN_ID`)")
    rerun.check(store, run_id, journal, task_key)
    cut = journal[task_key].get("seq", 0)
    gone = [k for k, m in journal.items() if m.get("seq", 0) >= cut]
    for key in reversed(gone):
        store.delete(runs.manifest_path(run_id, key))
    return gone


def drive(store: Any, run_id: str, flow: Flow, config: Any, *, executor: str = "ray",
          address: str | None = None, force: bool = False, block: bool = True,
          rerun_from: str | None = None, progress: Any = None, previous: Any = None) -> Any:
    """Run (or resume) `run_id` to its end, a failure, or (non-blocking) its next wait.
    `previous`: the config the run has so far, when `config` is one given now
    (`flows/reconfigure.py` decides what the run follows)."""
    check_executor(store, executor)
    lease = Lease(store, run_id).acquire(force=force)
    driver = sink = runner = beat = None
    try:
        runner = make_executor(executor, address, warm_modules(flow))  # a cluster that cannot be reached changes nothing
        meta = runs.read_run(store, run_id)
        if meta["status"] == runs.CANCELED:
            raise FlowError(f"run {run_id!r} is CANCELED; start a new run instead")
        if previous is not None:
            config = reconfigure.follow(store, meta, previous, config,
                                        set(runs.read_manifests(store, run_id)))
        plan = planning.settle(store, meta, config)  # on the cluster joined; a refusal changes nothing
        if rerun_from is not None:
            discard_from(store, run_id, rerun_from)
        _started(store, run_id, meta, executor, address)
        driver = Driver(store, run_id, meta["seed"], runner, block=block, progress=progress,
                        lease=lease)
        driver.plan = plan
        beat = _watch(store, run_id, meta.get("flow") or flow.name, progress)
        sink = _live_log(store, run_id, config, driver)
        mark("flow start")
        return _run_body(store, run_id, flow, config, driver)
    finally:
        mark("flow end")
        if sink is not None:
            sink.close()
        if runner is not None:
            runner.shutdown()
            mark("executor closed")
        if progress is not None:
            progress.close(driver.outcome if driver is not None else None)
        if beat is not None:
            beat.stop()
        lease.release()


def _started(store: Any, run_id: str, meta: dict, executor: str, address: str | None) -> None:
    runs.update_run(store, run_id, status=runs.RUNNING, error=None, error_task=None,
                    wake_at=None, waiting_for=None, executor=executor, address=address,
                    drivers=meta.get("drivers", 0) + 1, resumed=time.time())


def _watch(store: Any, run_id: str, name: str, progress: Any) -> Heartbeat | None:
    """The progress display, told the run's registered name (`rloo`, not `grpo`), its
    lines kept in the store, and its heartbeat started."""
    if progress is None:
        return None
    beat = Heartbeat(store, run_id, progress)
    progress.start_run(run_id, name, sink=beat.log)
    return beat.start()


def check_executor(store: Any, executor: str) -> None:
    """A `memory://` store lives in this process only: Ray workers would each see an empty
    one, so it is refused there, before anything is written."""
    if executor == "ray" and getattr(store, "protocol", None) == "memory":
        raise ConfigError(f"store {store.url} is in this process's memory, which Ray workers "
                          "cannot see; use --executor inline, a local path or s3://")


def _live_log(store: Any, run_id: str, config: Any, driver: Driver) -> Any:
    """Live metrics (TensorBoard, W&B) from each commit, when the config's `logger` asks."""
    from alignflow.flows.tracking.sink import open_sink

    sink = open_sink(store, run_id, config)
    if sink is not None:
        sink.catch_up(driver.manifests)
        driver.listeners.append(lambda manifest: sink.committed(manifest, driver.manifests))
    return sink


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
