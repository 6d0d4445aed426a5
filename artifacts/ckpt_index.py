"""Which task checkpoints of a run still exist whole, read without torch.

A task's checkpoint (its manifest's `checkpoint`) is a store folder: a model checkpoint
(`checkpoints.save`: `meta.json` written last), or a host's folder whose index file
(`INDEX`, `{"latest": {role: folder}}`) names the newest checkpoint of each role it trains.
Hosts keep the last `ckpt.max_num` per role and delete older ones, so a resume from an
early task (`--rerun-from`) must check first that what it would restore is still there,
and a resumed host must know what earlier drivers saved to prune it (`saved_by_run`).
"""

from __future__ import annotations

import contextlib
from typing import Any

from alignflow.artifacts.commit import manifests

INDEX = "host.json"  # a host's checkpoint folder: the newest checkpoint of each role


def parts(store: Any, folder: str) -> dict[str, str]:
    """role -> model checkpoint folder that restoring `folder` loads ({"": folder} for a
    plain model checkpoint)."""
    index = f"{folder}/{INDEX}"
    if store.exists(index):
        return dict(store.read_json(index).get("latest") or {})
    return {"": folder}


def restorable(store: Any, checkpoint: str) -> bool:
    """Whether restoring `checkpoint` finds every model checkpoint it needs complete (a
    checkpoint that is a single file, as a user flow's may be, needs only to exist)."""
    if not store.exists(checkpoint):
        return False
    if not store.list(checkpoint):  # a file, not a folder
        return True
    return all(store.exists(f"{p}/meta.json") for p in parts(store, checkpoint).values())


def saved_by_run(store: Any, run_id: str, role: str = "") -> list[str]:
    """The model checkpoint folders of `role` that committed tasks of `run_id` saved, in
    commit order (what a resumed host keeps or prunes; orphans of tasks never committed are
    `alignflow gc`'s)."""
    found = sorted((m.get("seq", 0), m["checkpoint"]) for _, m in manifests(store, run_id)
                   if isinstance(m.get("checkpoint"), str))
    out: list[str] = []
    for _, folder in found:
        path = parts(store, folder).get(role) if store.exists(folder) else None
        if path and path not in out and store.exists(f"{path}/meta.json"):
            out.append(path)
    return out


def prune(store: Any, saved: list[str], keep: int) -> None:
    """Delete the oldest of `saved` (in place) until `keep` remain, never fewer than 2: the
    one before the newest is the last *committed* one until the running task commits. A
    folder already gone is fine: a replaced worker, or one adopted from a dead driver, may
    have pruned it first (a chaos run failed on that)."""
    while len(saved) > max(keep, 2):
        with contextlib.suppress(FileNotFoundError):
            store.delete(saved.pop(0), recursive=True)


def damaged_checkpoints(store: Any, folder: str, listing: dict[str, dict[str, Any]]
                        ) -> list[str]:
    """What `listing` (a `Store.find` over `folder`) shows wrong with the model checkpoints
    in `folder` that are whole (their meta.json, written last, is there): each file meta.json
    records that is missing or of another size, one line each. A checkpoint pruned away
    (no meta.json) is not damage; a single-file checkpoint records no size to check."""
    out = []
    for meta_rel in sorted(r for r in listing if r.startswith(f"{folder.strip('/')}/")
                           and r.rsplit("/", 1)[-1] == "meta.json"):
        try:
            files = store.read_json(meta_rel).get("files")
        except (OSError, ValueError, AttributeError) as exc:
            line = (str(exc).splitlines() or [type(exc).__name__])[0]
            out.append(f"cannot read {store.where(meta_rel)}: {line}")
            continue
        base = meta_rel.rsplit("/", 1)[0]
        for name, size in (files.items() if isinstance(files, dict) else []):
            entry = listing.get(f"{base}/{name}")
            got = "missing" if entry is None else f"{entry['size']:,} bytes"
            if entry is None or entry["size"] != size:
                out.append(f"checkpoint file {store.where(f'{base}/{name}')} is {got}; "
                           f"{meta_rel} records {size!r} bytes (changed after it was saved)")
    return out
