"""The Python API: run, resume, list, inspect, cancel and delete runs.

Everything takes `store=` (a `Store`, a URL, or None for `$ALIGNFLOW_STORE` /
`./alignflow-store`). Runs are identified by id; their metadata lives in run.json.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from alignflow.artifacts import redact as redact_mod
from alignflow.artifacts import usercode
from alignflow.artifacts.redact import redact
from alignflow.artifacts.store import Store, open_store
from alignflow.errors import AlignflowError, FlowError
from alignflow.flows import registry
from alignflow.flows import trust as trust_mod
from alignflow.flows.config.refs import Reference, references
from alignflow.flows.control import life, planning
from alignflow.flows.control.removal import delete_run
from alignflow.flows.engine import Flow
from alignflow.flows.journal import codec, integrity, runs
from alignflow.flows.journal.identity import check_run_id, code_version, new_run_id
from alignflow.flows.journal.timers import send_event
from alignflow.flows.loader import builtin_name, canonical_ref, load_flow, ref_of
from alignflow.flows.ray.connect import connect
from alignflow.flows.ray.executors import check_executor
from alignflow.flows.seams import FlowConfig, FlowOutput, ProgressSink, StoreArg
from alignflow.flows.trust import signing
from alignflow.flows.trust.admit import Given, context
from alignflow.flows.trust.config import identity, stored_form
from alignflow.flows.trust.sources import pin

DEFAULT_SEED = 42  # OpenRLHF's --seed; `alignflow run` without --seed uses it too
__all__ = ["cancel", "delete", "get_metadata", "get_output", "get_status", "list_runs",
           "open_store", "resume", "resume_all", "run", "send_event", "tick"]


def run(flow: Flow | str, config: FlowConfig = None, *, run_id: str | None = None,
        store: StoreArg = None, seed: int = DEFAULT_SEED, address: str | None = None,
        executor: str = "auto", block: bool = True, parent_run: str | None = None,
        progress: ProgressSink | None = None, trust: Iterable[str] = (),
        given: dict[str, str] | None = None) -> FlowOutput:
    """Start a new run of `flow` and drive it to the end; returns the flow's output. Defaults
    are `alignflow run`'s. `given`: the config keys the user set and where (for the report).
    `executor`: ray, inline, or auto (the run's plan: `flows/control/planning.py`). The flow
    and what its config names (code, URLs, folders) are the caller's own; inside a campaign
    a round run is held to what the campaign's command confirmed (`flows/trust/`)."""
    outer = trust_mod.active()
    if isinstance(flow, str):
        ref = canonical_ref(flow)
        flow, _cfg = load_flow(ref, named=outer is None)
    else:
        ref = ref_of(flow)
    ref = builtin_name(ref, config) or ref
    name = ref if ref in registry.BUILTIN else flow.name
    run_id = check_run_id(run_id) if run_id is not None else new_run_id(name)
    store = open_store(store)
    refs = _references(ref, config)
    sayso = outer or trust_mod.local_sayso(trust, store_url=store.url, address=address,
                                           named=[r.value for r in refs])
    allowed = trust_mod.check(refs, sayso, context(store, run_id, {}))
    executor = planning.resolve(executor, address, config)[0]
    check_executor(store, executor)
    connect(executor, address)  # before run.json: an unreachable cluster leaves no run behind
    pins = pin(config, run_id=run_id)  # the models and data it reads from elsewhere, by hash
    meta = signing.signed(dict(_new_meta(run_id, flow, ref, config, refs, seed=seed,
                                         parent_run=parent_run, executor=executor,
                                         address=address, store_url=store.url),
                               sources=pins.record, given=dict(given or {})))  # this machine's word
    try:
        store.create_json(runs.run_json(run_id), meta)
    except FileExistsError:
        raise FlowError(f"run {run_id!r} already exists in {store.url}; resume it "
                        "(`alignflow resume`) or pick another --run-id") from None
    how = life.Attempt(executor, address, block=block, progress=progress)
    with usercode.allowing(allowed | pins.allowed), trust_mod.in_force(sayso):
        return life.start(store, meta, flow, config, how)


def _new_meta(run_id: str, flow: Flow, ref: str, config: FlowConfig, refs: list[Reference], *,
              seed: int, parent_run: str | None, executor: str, address: str | None,
              store_url: str) -> dict[str, Any]:
    """run.json of a new run: its config with credentials masked, the code it starts with
    (hashed) and what it trains (`flows/trust/`)."""
    stored, masked = stored_form(config)
    redact_mod.mask_referenced(codec.encode(config))
    code = dict(code_version(flow.fn), refs=trust_mod.record_of(refs))
    return {"format": 1, "run_id": run_id, "flow": flow.name if ref not in registry.BUILTIN
            else ref, "flow_ref": ref, "config": stored, "masked": masked, "code": code,
            "seed": seed, "identity": redact_mod.redact_tree(codec.encode(identity(config))),
            "parent_run": parent_run, "status": runs.RUNNING, "created": time.time(),
            "ended": None, "error": None, "executor": executor, "address": address,
            "store": store_url}


def _references(ref: str, config: FlowConfig) -> list[Reference]:
    """The run's flow and everything its config names (`flows/config/refs.py`)."""
    return [Reference("flow_ref", "flow", ref), *references(config)]


def resume(run_id: str, *, store: StoreArg = None, rerun_from: str | None = None,
           force: bool = False, executor: str | None = None, address: str | None = None,
           block: bool = True, progress: ProgressSink | None = None, flow: Flow | str | None = None,
           trust: Iterable[str] = (), trust_store: bool = False, config: FlowConfig = None,
           finished_output: bool = False, sets: Iterable[str] = ()) -> FlowOutput:
    """Re-run the flow with the current code, replaying committed tasks; returns its output.

    Nothing the store names acts without this machine's say-so (`flows/trust/`): the flow
    loads only by a built-in name, as `flow` (named again), as an already imported `@flow`,
    or from a confirmed file; the code, URLs and folders its config names must be confirmed
    by `trust` items, trusted directories, the trust file or `trust_store`. `config`: the
    config as given now (a re-run of the run's command): followed where the run can.
    `finished_output`: a finished run gives its output (`ckpt.load_enable`), not an error.
    `sets`: `KEY=VALUE` changes to the run's config (`alignflow resume RUN --set`), followed
    or refused as `config` is.
    """
    store = open_store(store)
    given = Given(flow, config, tuple(trust), trust_store, address, tuple(sets))
    how = life.Attempt(executor, address, force, block, rerun_from, progress, finished_output)
    return life.resume(store, run_id, given, how)


def resume_all(store: StoreArg = None, *, executor: str | None = None,
               address: str | None = None, trust: Iterable[str] = (), trust_store: bool = False,
               on_result: Callable[[str, FlowOutput], None] | None = None
               ) -> dict[str, FlowOutput]:
    """Resume every RESUMABLE or SLEEPING run, one after the other; run id -> output, or
    "error: <one line>" for a run that failed (the others still run). `on_result(run_id,
    result)` is called as each run ends."""
    store = open_store(store)
    results: dict[str, FlowOutput] = {}
    for meta in list_runs(store):
        if meta["status"] not in (runs.RESUMABLE, runs.SLEEPING):
            continue
        try:
            results[meta["run_id"]] = resume(meta["run_id"], store=store, executor=executor,
                                             address=address, trust=trust,
                                             trust_store=trust_store)
        except Exception as exc:  # one run's failure never stops the others
            results[meta["run_id"]] = f"error: {redact(error_line(exc))}"
        if on_result is not None:
            on_result(meta["run_id"], results[meta["run_id"]])
    return results


def error_line(exc: BaseException) -> str:
    """One line for an error: ours carry their own text (a list of problems joined with
    '; '), others get their type's name."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    listed = len(lines) > 1 and lines[0].endswith(":")
    text = " ".join([lines[0], "; ".join(lines[1:])]) if listed else runs.one_line(exc)
    return text if isinstance(exc, AlignflowError) else f"{type(exc).__name__}: {text}"


def tick(store: StoreArg = None, *, executor: str | None = None, address: str | None = None,
         now: float | None = None, trust: Iterable[str] = (),
         trust_store: bool = False) -> dict[str, str]:
    """Advance the SLEEPING runs that are due (wake time passed, or the awaited event sent),
    each on the Ray address it was started with (if this machine confirms it: `--trust`,
    the trust file or `trust_store`) unless `address` is given, without blocking on their
    next sleep; run id -> its status afterwards. An interrupted (RESUMABLE) run is not
    touched: it resumes only with `alignflow resume`."""
    store = open_store(store)
    now = time.time() if now is None else now
    out: dict[str, str] = {}
    for meta in list_runs(store):
        if not _due(store, meta, now):
            continue
        try:
            sayso = trust_mod.local_sayso(trust, store_url=store.url, address=address,
                                          trust_store=trust_store)
            where = trust_mod.check_address(meta["run_id"], meta.get("address"), sayso,
                                            signing.verdict(meta) is None)
            resume(meta["run_id"], store=store, executor=executor, block=False, trust=trust,
                   address=where, trust_store=trust_store)
        except Exception as exc:  # one run's failure never stops the others
            out[meta["run_id"]] = f"error: {redact(error_line(exc))}"
            continue
        out[meta["run_id"]] = get_status(meta["run_id"], store=store)
    return out


def _due(store: Store, meta: dict[str, Any], now: float) -> bool:
    if meta["status"] != runs.SLEEPING:
        return False
    if meta.get("waiting_for"):
        from alignflow.flows.journal.timers import event_path

        if store.exists(event_path(meta["run_id"], meta["waiting_for"])):
            return True
    return meta.get("wake_at") is not None and meta["wake_at"] <= now


def list_runs(store: StoreArg = None,
              problems: list[runs.Problem] | None = None) -> list[dict[str, Any]]:
    """run.json of every run (status as users see it, plus `tasks` = committed count). A run
    whose run.json cannot be read is listed with status UNREADABLE and its `problem`; one
    whose committed files no longer match its manifests keeps its status and lists them in
    `damaged` (`flows/journal/integrity.py` says what is checked), noted in `problems`."""
    store = open_store(store)
    found: list[runs.Problem] = [] if problems is None else problems
    listing = store.find("runs")  # one LIST for the ids, the task counts and the checks
    out: list[dict[str, Any]] = []
    for run_id in runs.list_run_ids(store, found, listing):
        bad = [p for p in found if p.run_id == run_id]
        meta: dict[str, Any]
        if bad:
            meta = {"run_id": run_id, "status": runs.UNREADABLE, "problem": bad[0].message}
        else:
            meta = runs.read_run(store, run_id)
            meta["status"] = runs.effective_status(store, meta)
            meta["damaged"] = _damaged(store, run_id, meta["status"], listing, found)
        meta["tasks"] = len(runs.task_files(store, run_id, listing))
        out.append(meta)
    return out


def _damaged(store: Store, run_id: str, status: str, listing: dict[str, dict[str, Any]],
             problems: list[runs.Problem]) -> list[str]:
    """The run's damaged files; the first one is a problem, the count of the rest with it."""
    damaged = integrity.listed(store, run_id, status, listing)
    if damaged:
        more = f" (and {len(damaged) - 1} more: `alignflow status {run_id}` names each)" \
            if len(damaged) > 1 else ""
        problems.append(runs.Problem(runs.run_dir(run_id), run_id, damaged[0] + more))
    return damaged


def get_status(run_id: str, *, store: StoreArg = None) -> str:
    """The run's status as users see it (a dead driver's RUNNING run reads RESUMABLE)."""
    store = open_store(store)
    return runs.effective_status(store, runs.read_run(store, run_id))


def get_metadata(run_id: str, *, store: StoreArg = None) -> dict[str, Any]:
    """run.json of the run, with its status as users see it."""
    store = open_store(store)
    meta = runs.read_run(store, run_id)
    meta["status"] = runs.effective_status(store, meta)
    return meta


def get_output(run_id: str, task_key: str | None = None, *, store: StoreArg = None) -> FlowOutput:
    """The run's output (None until SUCCESSFUL), or one committed task's output."""
    store = open_store(store)
    if task_key is None:
        return codec.decode(runs.read_run(store, run_id).get("output"), runs.run_json(run_id))
    rel = runs.manifest_path(run_id, task_key)
    if not store.exists(rel):
        runs.read_run(store, run_id)
        raise FlowError(f"run {run_id!r} has no committed task {task_key!r}")
    return codec.decode(store.read_json(rel)["output"], rel)


def cancel(run_id: str, *, store: StoreArg = None) -> None:
    """Mark CANCELED; a live driver stops at its next task boundary."""
    store = open_store(store)
    runs.update_run(store, run_id, status=runs.CANCELED, ended=time.time())


def delete(run_id: str, *, store: StoreArg = None) -> None:
    """Remove the run's folder (metadata, journal, data, logs) from the store, completely or
    not at all; a live run (its lease held) is refused (`flows/control/removal.py`)."""
    delete_run(open_store(store), run_id)
