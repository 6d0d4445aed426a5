"""Find (and remove) orphans: files under runs/ that no committed manifest accounts for.

Kept: the run's own records (run.json, journal.json, the live loggers' state logger.json, a
campaign's control.json, the tombstone), the lease (lease/), manifests, logs/, events/, the
driver's progress (progress/), files listed in a manifest's artifacts and everything under
a checkpoint folder a manifest names. The rest — data
files of tasks that died before committing, temp files of interrupted writes, checkpoint
folders no manifest names — is an orphan.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from alignflow.artifacts.commit import TOMBSTONE, manifests, run_ids
from alignflow.artifacts.store import Store

KEPT_FILES = ("run.json", "lease.json", "journal.json", "logger.json", "control.json",
              TOMBSTONE)
KEPT_DIRS = ("tasks/", "logs/", "events/", "final/", "lease/", "progress/")


@dataclass(frozen=True)
class Orphan:
    path: str
    bytes: int


def _referenced(store: Store, run_id: str) -> tuple[set[str], list[str]]:
    files, dirs = set[str](), list[str]()
    for _, m in manifests(store, run_id):
        files.update(a["path"] for a in m["artifacts"])
        if m.get("checkpoint"):
            dirs.append(m["checkpoint"].rstrip("/") + "/")
    return files, dirs


def _is_kept(rel: str, run_id: str, files: set[str], dirs: list[str]) -> bool:
    inner = rel[len(f"runs/{run_id}/"):]
    name = rel.rsplit("/", 1)[-1]
    if inner in KEPT_FILES or rel in files or any(rel.startswith(d) for d in dirs):
        return True
    if inner.startswith("tasks/"):
        return not name.startswith(".")  # hidden files there are failed-commit temps
    return inner.startswith(KEPT_DIRS)


def find_orphans(store: Store, run_id: str | None = None, min_age_s: float = 0.0) -> list[Orphan]:
    """Orphans of one run or of all runs, oldest-first order not guaranteed; files modified
    less than `min_age_s` ago are skipped (a live task may still be writing them)."""
    out = []
    now = time.time()
    for rid in [run_id] if run_id else run_ids(store):
        files, dirs = _referenced(store, rid)
        found = store.find(f"runs/{rid}")  # a link is listed (and removed) itself, not followed
        for rel, info in sorted(found.items()):
            if _is_kept(rel, rid, files, dirs) or _age(info, now) < min_age_s:
                continue
            out.append(Orphan(rel, int(info.get("size") or 0)))
    return out


def _age(info: dict, now: float) -> float:
    mtime = info.get("mtime")
    if mtime is None:
        return float("inf")
    stamp = mtime.timestamp() if hasattr(mtime, "timestamp") else float(mtime)
    return now - stamp


def delete_orphans(store: Store, orphans: list[Orphan]) -> int:
    """Remove the given orphans; returns the bytes freed."""
    for o in orphans:
        store.delete(o.path)
    return sum(o.bytes for o in orphans)
