"""`alignflow delete`: remove a dead run completely or not at all; a live run is refused.

The run's lease is taken first, so no driver runs it (a live one makes `delete` fail with
`LeaseHeld`) and no driver can start it while it goes. Then the run disappears for every
reader in one step:
- local store: the run folder is renamed into `trash/` (one atomic rename on the same
  filesystem), then removed from there;
- S3 and memory stores (no folder rename): a tombstone `runs/<id>/deleting.json` is written
  first (one PUT); readers (`ls`, `status`, `resume`, the catalog) treat a run with a
  tombstone as gone. Its objects are then deleted, run.json and the tombstone last.
A deletion cut short leaves a trash folder or a tombstoned run that no reader shows;
`alignflow delete RUN` again (or any later delete, for trash) finishes it.
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from typing import Any

from alignflow.errors import LeaseHeld, RunNotFound
from alignflow.flows import runs
from alignflow.flows.lease import Lease, holder, read_lease

TRASH = "trash"


def delete_run(store: Any, run_id: str) -> None:
    """Delete `run_id` from `store` (see the module docstring)."""
    tombstoned = store.exists(runs.tombstone_path(run_id))
    if not tombstoned and not store.exists(runs.run_json(run_id)):
        raise RunNotFound(f"no run {run_id!r} in store {store.url} (see `alignflow ls`)")
    lease = Lease(store, run_id)
    try:
        lease.acquire()
    except LeaseHeld:
        current = read_lease(store, run_id)[1] or {}
        raise LeaseHeld(f"cannot delete run {run_id!r}: it is live ({holder(current)}); "
                        f"cancel it (`alignflow cancel {run_id}`), let its driver stop, then "
                        "delete") from None
    lease.stop_heartbeat()  # the lease file goes with the run
    try:
        if store.is_local:
            _delete_local(store, run_id)
        else:
            _delete_remote(store, run_id, tombstoned)
    finally:
        lease.release()  # only if the deletion stopped before the lease file went


def _delete_local(store: Any, run_id: str) -> None:
    trash = store.path(TRASH)
    os.makedirs(trash, exist_ok=True)
    target = os.path.join(trash, f"{run_id}-{uuid.uuid4().hex[:8]}")
    os.rename(store.path(runs.run_dir(run_id)), target)  # gone for readers, all at once
    empty_trash(store)


def empty_trash(store: Any) -> None:
    """Remove what interrupted local deletions left in `trash/`."""
    trash = store.path(TRASH)
    if os.path.isdir(trash):
        for name in os.listdir(trash):
            shutil.rmtree(os.path.join(trash, name), ignore_errors=True)


def _delete_remote(store: Any, run_id: str, tombstoned: bool) -> None:
    if not tombstoned:
        store.write_json(runs.tombstone_path(run_id), {"run_id": run_id, "since": time.time()})
    last = {runs.run_json(run_id), runs.tombstone_path(run_id)}
    rest = [r for r in store.list(runs.run_dir(run_id)) if r not in last]
    if rest:
        with store._errors(runs.run_dir(run_id)):
            store.fs.rm([store.path(r) for r in rest])  # batched deletes on S3
    if store.exists(runs.run_json(run_id)):
        store.delete(runs.run_json(run_id))
    store.delete(runs.tombstone_path(run_id))
