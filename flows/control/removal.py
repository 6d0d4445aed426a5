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

import contextlib
import os
import time
import uuid

from alignflow.artifacts.localfs import LocalRoot
from alignflow.artifacts.store import Store
from alignflow.errors import LeaseHeld, RunNotFound
from alignflow.flows.journal import runs
from alignflow.flows.journal.lease import Lease, holder, read_lease

TRASH = "trash"


def delete_run(store: Store, run_id: str) -> None:
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
        local = store.local  # None: not a local store
        if local is not None:
            _delete_local(store, local, run_id)
        else:
            _delete_remote(store, run_id, tombstoned)
    finally:
        lease.release()  # only if the deletion stopped before the lease file went


def _delete_local(store: Store, local: LocalRoot, run_id: str) -> None:
    """Rename the run folder into trash/ (both reached through no link: a link there would
    move, then delete, folders outside the store), then empty the trash."""
    name = f"{run_id}-{uuid.uuid4().hex[:8]}"
    store.writable_path(f"{TRASH}/{name}")  # makes trash/, refuses a link on the way
    with store._errors(runs.run_dir(run_id)), \
            local.parent(runs.run_dir(run_id), doing="deleting") as (src, old), \
            local.folder(TRASH, doing="deleting") as dst:
        os.rename(old, name, src_dir_fd=src, dst_dir_fd=dst)  # gone for readers, all at once
    empty_trash(store)


def empty_trash(store: Store) -> None:
    """Remove what interrupted local deletions left in `trash/` (a link there is removed
    itself; nothing is followed)."""
    local = store.local
    if local is None:  # only a local store deletes through trash/
        return
    try:
        with local.folder(TRASH, doing="deleting") as fd:
            names = os.listdir(fd)
    except FileNotFoundError:
        return
    for name in names:
        with contextlib.suppress(OSError):
            store.delete(f"{TRASH}/{name}", recursive=True)


def _delete_remote(store: Store, run_id: str, tombstoned: bool) -> None:
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
