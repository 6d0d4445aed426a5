"""Run metadata: `runs/<run_id>/run.json`, statuses, and the journal of committed manifests.

run.json is the one mutable file of a run (status, timings, error); manifests under
`runs/<run_id>/tasks/` are create-once and are the truth about what has run. A drive reads
both once, after taking the run's lease, as a `RunState` handed down the run's life
(`flows/control/life.py`) instead of the store and the run id being passed back and forth.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from alignflow.artifacts.bounds import parse_json
from alignflow.artifacts.commit import TOMBSTONE, tombstoned
from alignflow.artifacts.store import Store
from alignflow.errors import FlowError, RunNotFound, SchemaError, StoreError, StoreFileRefused
from alignflow.flows.journal.run_record import check_record

RUNNING, SUCCESSFUL, FAILED = "RUNNING", "SUCCESSFUL", "FAILED"
RESUMABLE, CANCELED, SLEEPING = "RESUMABLE", "CANCELED", "SLEEPING"
UNREADABLE = "UNREADABLE"  # shown for a run whose run.json cannot be read; never written
STATUSES = (RUNNING, SUCCESSFUL, FAILED, RESUMABLE, CANCELED, SLEEPING)
TASKS = "tasks/"


def run_dir(run_id: str) -> str:
    return f"runs/{run_id}"


def run_json(run_id: str) -> str:
    return f"runs/{run_id}/run.json"


def manifest_path(run_id: str, task_key: str) -> str:
    return f"runs/{run_id}/tasks/{task_key}.json"


def read_run(store: Store, run_id: str) -> dict:
    """run.json of `run_id`; `RunNotFound` naming the store when there is none, `SchemaError`
    naming the file and key when it holds what no driver writes (`run_record.py`)."""
    if not store.exists(run_json(run_id)):
        raise RunNotFound(f"no run {run_id!r} in store {store.url} (see `alignflow ls`)")
    meta = store.read_json(run_json(run_id))
    where = f"{store.url.rstrip('/')}/{run_json(run_id)}"
    if not isinstance(meta, dict) or not isinstance(meta.get("run_id", run_id), str):
        raise SchemaError(f"{where} holds no run record (a JSON object with run_id, status, ...)")
    return check_record(meta, run_id, STATUSES, where)


def update_run(store: Store, run_id: str, **fields: Any) -> dict:
    """Read-modify-write run.json (only the driver holding the lease, or `cancel`, writes it)."""
    meta = read_run(store, run_id)
    meta.update(fields)
    store.write_json(run_json(run_id), meta)
    return meta


def effective_status(store: Store, meta: dict, now: float | None = None) -> str:
    """Status as users see it: a RUNNING run whose lease expired is RESUMABLE."""
    status: str = meta.get("status", "")
    if status != RUNNING:
        return status
    from alignflow.flows.journal.lease import lease_expired

    return RESUMABLE if lease_expired(store, meta["run_id"], now) else RUNNING


@dataclass(frozen=True)
class Problem:
    """A file in the store that could not be used; the rest of the store is still served."""

    path: str
    run_id: str
    message: str


def tombstone_path(run_id: str) -> str:
    """Written first by `delete` (on stores without an atomic folder rename): from then on
    the run is gone for every reader, however far the deletion got."""
    return f"runs/{run_id}/{TOMBSTONE}"


def run_listing(store: Store, odd: list[Problem] | None = None,
                found: dict[str, dict] | None = None) -> tuple[list[str], list[str]]:
    """(run ids with a run.json, run ids being deleted), from one recursive listing (`found`,
    `store.find("runs")`, when the caller made it). What a store must not hold (a link, a
    FIFO, a device) is never followed; with `odd`, each one under a run is noted there, and
    a run folder that is one is listed with it."""
    found = store.find("runs") if found is None else found
    deleting = tombstoned(list(found))
    ids = {p[1] for p in (r.split("/") for r in found)
           if len(p) == 3 and p[2] == "run.json" and p[1] not in deleting}
    for rel, info in sorted(found.items()):
        parts = rel.split("/")
        if odd is not None and info["type"] != "file" and len(parts) > 1 \
                and parts[1] not in deleting:
            odd.append(Problem(rel, parts[1], str(StoreFileRefused(
                f"{store.url.rstrip('/')}/{rel} is {info['type']}; a store holds only regular "
                "files and folders, and alignflow never follows a link in it"))))
            ids |= {parts[1]} if len(parts) == 2 else set()
    return sorted(ids), sorted(deleting)


def list_run_ids(store: Store, problems: list[Problem] | None = None,
                 found: dict[str, dict] | None = None) -> list[str]:
    """Every run id with a run.json, oldest first by creation time. A run.json that cannot
    be read, or a link, FIFO or device in a run, is a `Problem` in `problems` (its run
    sorted first) or, without that list, an error."""
    metas: list[tuple[float, str]] = []
    odd: list[Problem] = []
    ids = run_listing(store, odd, found)[0]
    if odd and problems is None:
        raise SchemaError(odd[0].message)
    for run_id in ids:
        bad = any(p.run_id == run_id for p in odd)
        metas.append((0.0 if bad else _created(store, run_id, odd, problems is None), run_id))
    if problems is not None:
        problems.extend(sorted(odd, key=lambda p: p.run_id))
    return [i for _, i in sorted(metas)]


def _created(store: Store, run_id: str, problems: list[Problem], strict: bool) -> float:
    """When the run was created (0.0, and a `Problem`, when its run.json cannot be read)."""
    try:
        return float(read_run(store, run_id).get("created") or 0.0)
    except StoreError:  # the store itself is unreachable: not one run's problem
        raise
    except (ValueError, TypeError, OSError) as exc:
        if strict:
            raise
        problems.append(Problem(run_json(run_id), run_id, one_line(exc)))
        return 0.0


def journal_path(run_id: str) -> str:
    return f"runs/{run_id}/journal.json"


def task_files(store: Store, run_id: str, found: dict[str, dict] | None = None) -> dict[str, str]:
    """task manifest path -> a stamp of the object (ETag or mtime, and size): one LIST, or
    taken from `found` (a listing of runs/). A link, FIFO or device there (the tasks folder
    itself, too) is listed, so that reading it names it."""
    tasks = f"runs/{run_id}/tasks"
    found = store.find(tasks) if found is None else {
        p: i for p, i in found.items() if p == tasks or p.startswith(f"{tasks}/")}
    return {p: f"{i['stamp']}:{i['size']}" + ("" if i["type"] == "file" else f":{i['type']}")
            for p, i in found.items()
            if i["type"] != "file" or p.endswith(".json") and "/." not in f"/{p}"}


def read_manifests(store: Store, run_id: str, problems: list[Problem] | None = None, *,
                   found: dict[str, dict] | None = None,
                   snapshot_only: bool = False) -> dict[str, dict]:
    """All committed manifests of a run: task_key -> manifest, in commit order.

    Manifests are the truth; `journal.json` is a snapshot of them (with each object's stamp)
    so resuming a long run on S3 costs one LIST and a few GETs, not one GET per task. A
    manifest that cannot be parsed raises a `SchemaError` naming it, or, given `problems`,
    is left out and noted there. `found`: a listing of runs/ already made; `snapshot_only`:
    only what the snapshot holds unchanged, nothing more read (`ls` of a running run)."""
    listing = task_files(store, run_id, found)
    snapshot = _read_snapshot(store, run_id)
    got = [m for p, (stamp, m) in snapshot.items() if listing.get(p) == stamp]
    missing = [] if snapshot_only else \
        [p for p in listing if snapshot.get(p, (None,))[0] != listing[p]]
    for rel, blob in store.read_many(missing).items():  # each bounded (artifacts/bounds.py)
        manifest = _parse_manifest(store, rel, blob, problems)
        if manifest is not None:
            got.append(manifest)
    got.sort(key=lambda m: (_number(m.get("seq")), _number(m.get("ended"))))
    return {m["task_key"]: m for m in got}


def _number(value: Any) -> float:
    """A manifest's number for ordering (0 for anything else: a hand-edited manifest must
    not make the others unsortable)."""
    return value if isinstance(value, int | float) and not isinstance(value, bool) else 0


def _parse_manifest(store: Store, rel: str, blob: Any,
                    problems: list[Problem] | None) -> dict | None:
    where = f"{store.url.rstrip('/')}/{rel}"
    try:
        if isinstance(blob, StoreFileRefused):
            raise blob
        if isinstance(blob, BaseException):
            raise SchemaError(f"cannot read {where}: {one_line(blob)}")
        manifest = parse_json(blob, where)
        if not isinstance(manifest, dict) or not isinstance(manifest.get("task_key"), str):
            raise SchemaError(f"{where} is not a task manifest (no task_key)")
        return manifest
    except SchemaError as exc:
        if problems is None:
            raise
        problems.append(Problem(rel, run_id_of(rel), str(exc)))
        return None


def run_id_of(rel: str) -> str:
    return rel.split("/")[1]


def one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _read_snapshot(store: Store, run_id: str) -> dict[str, tuple[str, dict]]:
    """The journal snapshot; an unreadable one is ignored (manifests are re-read instead)."""
    try:
        data = store.read_json(journal_path(run_id))
        return {p: (e["stamp"], e["manifest"]) for p, e in data.get("entries", {}).items()
                if isinstance(e.get("manifest"), dict) and "task_key" in e["manifest"]}
    except (FileNotFoundError, ValueError, TypeError, AttributeError, KeyError):
        return {}


def write_snapshot(store: Store, run_id: str, manifests: dict[str, dict]) -> None:
    """Snapshot the committed manifests (called when a driver attempt ends)."""
    listing = task_files(store, run_id)
    entries = {manifest_path(run_id, k): {"stamp": listing[manifest_path(run_id, k)],
                                          "manifest": m}
               for k, m in manifests.items() if manifest_path(run_id, k) in listing}
    store.write_json(journal_path(run_id), {"format": 1, "entries": entries})


def now() -> float:
    return time.time()


@dataclass
class RunState:
    """One run as a drive holds it: its store, id, run.json and committed manifests."""

    store: Store
    run_id: str
    meta: dict
    manifests: dict[str, dict]

    finished: bool = False  # SUCCESSFUL when read (`read_state(finished_ok=True)`)


def read_state(store: Store, run_id: str, *, rerun: bool = False,
               finished_ok: bool = False) -> RunState:
    """The run `resume` may continue, read once under its lease; `FlowError` saying why
    not (being deleted, finished unless `rerun` or `finished_ok`, canceled)."""
    meta = read_run(store, run_id)
    if store.exists(tombstone_path(run_id)):
        raise FlowError(f"run {run_id!r} is being deleted; finish with `alignflow delete "
                        f"{run_id}`")
    status = meta.get("status")
    if status == SUCCESSFUL and not (rerun or finished_ok):
        raise FlowError(f"run {run_id!r} is already SUCCESSFUL; nothing to resume "
                        "(--rerun-from TASK_KEY re-runs from a task)")
    if status == CANCELED:
        raise FlowError(f"run {run_id!r} is CANCELED; it cannot be resumed")
    return RunState(store, run_id, meta, read_manifests(store, run_id), status == SUCCESSFUL)


def new_state(store: Store, meta: dict) -> RunState:
    """The state of a run whose run.json was just created: nothing committed yet."""
    return RunState(store, meta["run_id"], meta, {})
