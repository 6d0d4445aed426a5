"""`resume --rerun-from KEY`: the tasks before KEY replay and each worker group restores
the newest checkpoint they committed. Hosts keep only the last `ckpt.max_num` checkpoints,
so an early KEY may need one that is gone: that is found before anything is deleted, and
the error names the keys that can be rerun."""

from __future__ import annotations

from alignflow.artifacts.ckpt_index import restorable
from alignflow.artifacts.store import Store
from alignflow.errors import FlowError


def needs(journal: dict[str, dict], task_key: str) -> dict[str, tuple[str, str]]:
    """worker -> (task key, checkpoint) each worker restores when the run reruns from
    `task_key`: the newest checkpoint committed before it."""
    cut = journal[task_key].get("seq", 0)
    found: dict[str, tuple[str, str]] = {}
    for key, m in sorted(journal.items(), key=lambda km: km[1].get("seq", 0)):
        if m.get("seq", 0) < cut and m.get("worker") and isinstance(m.get("checkpoint"), str):
            found[m["worker"]] = (key, m["checkpoint"])
    return found


def check(store: Store, run_id: str, journal: dict[str, dict], task_key: str) -> None:
    """`FlowError` when a checkpoint the rerun would restore is no longer in the store."""
    cache: dict[str, bool] = {}

    def ok(key: str) -> tuple[str, str, str] | None:
        for worker, (source, ckpt) in needs(journal, key).items():
            if not cache.setdefault(ckpt, restorable(store, ckpt)):
                return worker, source, ckpt
        return None
    missing = ok(task_key)
    if missing is None:
        return
    worker, source, ckpt = missing
    order = sorted(journal, key=lambda k: journal[k].get("seq", 0))
    later = order[order.index(task_key) + 1:]
    first = None
    for key in reversed(later):  # the keys after which every checkpoint needed is kept
        if ok(key) is not None:
            break
        first = key
    can = f"the keys from {first!r} on can be rerun" if first else "no key can be rerun"
    raise FlowError(f"--rerun-from {task_key!r}: worker {worker!r} would restore the checkpoint "
                    f"of task {source!r} ({ckpt}), which is no longer in the store (a host keeps "
                    f"the last ckpt.max_num checkpoints); {can}; run {run_id!r} is unchanged")
