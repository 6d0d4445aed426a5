"""Run metadata: `runs/<run_id>/run.json`, statuses, and the journal of committed manifests.

run.json is the one mutable file of a run (status, timings, error); manifests under
`runs/<run_id>/tasks/` are create-once and are the truth about what has run.
"""

from __future__ import annotations

import json
import time
from typing import Any

from alignflow.errors import RunNotFound

RUNNING, SUCCESSFUL, FAILED = "RUNNING", "SUCCESSFUL", "FAILED"
RESUMABLE, CANCELED, SLEEPING = "RESUMABLE", "CANCELED", "SLEEPING"
STATUSES = (RUNNING, SUCCESSFUL, FAILED, RESUMABLE, CANCELED, SLEEPING)
TASKS = "tasks/"


def run_dir(run_id: str) -> str:
    return f"runs/{run_id}"


def run_json(run_id: str) -> str:
    return f"runs/{run_id}/run.json"


def manifest_path(run_id: str, task_key: str) -> str:
    return f"runs/{run_id}/tasks/{task_key}.json"


def read_run(store: Any, run_id: str) -> dict:
    """run.json of `run_id`; `RunNotFound` naming the store when there is none."""
    if not store.exists(run_json(run_id)):
        raise RunNotFound(f"no run {run_id!r} in store {store.url} (see `alignflow ls`)")
    return store.read_json(run_json(run_id))


def update_run(store: Any, run_id: str, **fields: Any) -> dict:
    """Read-modify-write run.json (only the driver holding the lease, or `cancel`, writes it)."""
    meta = read_run(store, run_id)
    meta.update(fields)
    store.write_json(run_json(run_id), meta)
    return meta


def effective_status(store: Any, meta: dict, now: float | None = None) -> str:
    """Status as users see it: a RUNNING run whose lease expired is RESUMABLE."""
    status = meta.get("status")
    if status != RUNNING:
        return status
    from alignflow.flows.lease import lease_expired

    return RESUMABLE if lease_expired(store, meta["run_id"], now) else RUNNING


def list_run_ids(store: Any) -> list[str]:
    """Every run id with a run.json, oldest first by creation time."""
    ids = [p.split("/")[1] for p in store.list("runs", "*/run.json") if p.count("/") == 2]
    metas = [(store.read_json(run_json(i)).get("created", 0.0), i) for i in ids]
    return [i for _, i in sorted(metas)]


def journal_path(run_id: str) -> str:
    return f"runs/{run_id}/journal.json"


def _listing(store: Any, run_id: str) -> dict[str, str]:
    """task manifest path -> a stamp of the object (ETag or mtime, and size): one LIST."""
    base = store.path(f"runs/{run_id}/tasks")
    if not store.fs.exists(base):
        return {}
    found = store.fs.find(base, detail=True)
    return {store.rel(p): f"{i.get('ETag') or i.get('mtime') or i.get('LastModified')}:{i['size']}"
            for p, i in found.items() if p.endswith(".json") and "/." not in p}


def read_manifests(store: Any, run_id: str) -> dict[str, dict]:
    """All committed manifests of a run: task_key -> manifest, in commit order.

    Manifests are the truth; `journal.json` is a snapshot of them (with each object's stamp)
    so resuming a long run on S3 costs one LIST and a few GETs, not one GET per task."""
    listing = _listing(store, run_id)
    snapshot = _read_snapshot(store, run_id)
    found = [m for p, (stamp, m) in snapshot.items() if listing.get(p) == stamp]
    missing = [p for p in listing if snapshot.get(p, (None,))[0] != listing[p]]
    if missing:
        blobs = store.fs.cat([store.path(p) for p in missing])
        found += [json.loads(b) for b in blobs.values()]
    found.sort(key=lambda m: (m.get("seq", 0), m.get("ended") or 0.0))
    return {m["task_key"]: m for m in found}


def _read_snapshot(store: Any, run_id: str) -> dict[str, tuple[str, dict]]:
    try:
        data = store.read_json(journal_path(run_id))
    except (FileNotFoundError, ValueError):
        return {}
    return {p: (e["stamp"], e["manifest"]) for p, e in data.get("entries", {}).items()}


def write_snapshot(store: Any, run_id: str, manifests: dict[str, dict]) -> None:
    """Snapshot the committed manifests (called when a driver attempt ends)."""
    listing = _listing(store, run_id)
    entries = {manifest_path(run_id, k): {"stamp": listing[manifest_path(run_id, k)],
                                          "manifest": m}
               for k, m in manifests.items() if manifest_path(run_id, k) in listing}
    store.write_json(journal_path(run_id), {"format": 1, "entries": entries})


def now() -> float:
    return time.time()
