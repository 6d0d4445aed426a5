"""A run's committed files checked against the manifests that list them, so `ls` and
`status` say when a store was damaged after a commit (a Parquet file truncated or deleted, a
checkpoint cut short) instead of serving the rest as if nothing happened.

What is checked, and what it costs:
- `ls` (`listed`): from the one listing of runs/ it makes anyway and each run's manifests
  (its journal snapshot, one GET; manifests committed since are read too, except for a
  RUNNING run, whose newest ones `status` checks): every data file a manifest lists is
  there, a regular file, of the size the manifest records. No data file is read: a truncated
  or rewritten file changes its size, a deleted one is missing.
- `status RUN` (`deep`): the same over all the run's manifests, and each model checkpoint a
  manifest names that is whole (its meta.json is there): the files meta.json records, by
  size (one small GET per checkpoint).
Neither compares contents; `alignflow sql` checks Parquet footers too (catalog/verify.py).
"""

from __future__ import annotations

from alignflow.artifacts.ckpt_index import damaged_checkpoints
from alignflow.artifacts.commit import damaged_files
from alignflow.artifacts.store import Store
from alignflow.flows.journal import runs


def listed(store: Store, run_id: str, status: str, found: dict[str, dict]) -> list[str]:
    """`ls`'s check of one run against `found` (a listing of runs/): one line per manifest
    that cannot be read and per damaged file."""
    unreadable: list[runs.Problem] = []
    manifests = runs.read_manifests(store, run_id, unreadable, found=found,
                                    snapshot_only=status == runs.RUNNING)
    return [p.message for p in unreadable] + _files(store, run_id, manifests, found)


def deep(store: Store, run_id: str, manifests: dict[str, dict]) -> list[str]:
    """`status`'s check of one run: its data files and its whole checkpoints."""
    found = store.find(runs.run_dir(run_id))
    out = _files(store, run_id, manifests, found)
    folders = {m["checkpoint"] for m in manifests.values()
               if isinstance(m.get("checkpoint"), str)}
    for folder in sorted(folders):
        out += damaged_checkpoints(store, folder, found)
    return out


def _files(store: Store, run_id: str, manifests: dict[str, dict], found: dict[str, dict]
           ) -> list[str]:
    return [line for key, m in manifests.items()
            for line in damaged_files(store, runs.manifest_path(run_id, key), m, found,
                                      runs.run_dir(run_id))]
