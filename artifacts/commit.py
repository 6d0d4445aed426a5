"""Task manifests: the commit that makes a task's data files visible.

`runs/<run_id>/tasks/<task_key>.json` is written once (`Store.create_json`). A data file is
committed iff a committed manifest lists it; readers go through `committed_files`.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError, SchemaError

if TYPE_CHECKING:  # parquet_io imports pyarrow: readers of manifests (the catalog) need none
    from alignflow.artifacts.parquet_io import ArtifactRef

FORMAT = 1
STATUSES = ("SUCCESSFUL", "FAILED_CAUGHT")
FIELDS = ("format", "run_id", "task_key", "task", "version", "code_hash", "input_hash", "seed",
          "status", "output", "artifacts", "checkpoint", "attempts", "started", "ended",
          "worker")
# ArtifactRef's fields (a test checks they agree)
ARTIFACT_FIELDS = ("table", "path", "rows", "schema", "schema_version", "bytes")
# Written first by `alignflow delete` on stores without an atomic folder rename: a run
# with `runs/<run_id>/deleting.json` is gone for every reader (flows/control/removal.py).
TOMBSTONE = "deleting.json"


def tombstoned(rels: list[str]) -> set[str]:
    """Run ids with a tombstone among store paths `rels` (one listing of runs/)."""
    return {p[1] for p in (r.split("/") for r in rels)
            if len(p) == 3 and p[0] == "runs" and p[2] == TOMBSTONE}


def _check_key(task_key: str) -> None:
    parts = task_key.split("/")
    if not task_key or any(p in ("", ".", "..") or p.startswith(".") for p in parts):
        raise ConfigError(f"task key {task_key!r}: expected '/'-separated names, none empty "
                          "or starting with '.'")


def manifest_path(run_id: str, task_key: str) -> str:
    _check_key(run_id)
    _check_key(task_key)
    if "/" in run_id:
        raise ConfigError(f"run id {run_id!r} must not contain '/'")
    return f"runs/{run_id}/tasks/{task_key}.json"


def _defaults(run_id: str, task_key: str) -> dict[str, Any]:
    now = time.time()
    return {"format": FORMAT, "run_id": run_id, "task_key": task_key,
            "task": task_key.rsplit("/", 1)[-1], "version": 1, "code_hash": None,
            "input_hash": None, "seed": None, "status": "SUCCESSFUL", "output": None,
            "artifacts": [], "checkpoint": None, "attempts": 1, "started": now, "ended": now,
            "worker": None}


def _artifact_json(a: ArtifactRef | dict) -> dict[str, Any]:
    return dict(a) if isinstance(a, dict) else a.to_json()


def validate(manifest: Any, where: str) -> dict[str, Any]:
    """Check a manifest's shape; `where` (its path) goes in the error."""
    if not isinstance(manifest, dict):
        raise SchemaError(f"{where}: manifest is {type(manifest).__name__}, expected an object")
    for name in FIELDS:
        if name not in manifest:
            raise SchemaError(f"{where}: manifest lacks field {name!r}")
    if manifest["format"] != FORMAT:
        raise SchemaError(f"{where}: manifest format {manifest['format']!r}, expected {FORMAT}")
    if manifest["status"] not in STATUSES:
        raise SchemaError(f"{where}: status {manifest['status']!r}, expected one of {STATUSES}")
    if not isinstance(manifest["artifacts"], list):
        raise SchemaError(f"{where}: field 'artifacts' must be a list")
    for i, art in enumerate(manifest["artifacts"]):
        missing = [f for f in ARTIFACT_FIELDS if not isinstance(art, dict) or f not in art]
        if missing:
            raise SchemaError(f"{where}: artifacts[{i}] lacks field {missing[0]!r}")
    return manifest


def commit(store: Store, run_id: str, task_key: str, fields: dict[str, Any]) -> dict[str, Any]:
    """Write the task's manifest once; `CommitConflict` if it exists. Returns the manifest.

    Missing fields get defaults (status SUCCESSFUL, no artifacts, now as start/end)."""
    rel = manifest_path(run_id, task_key)
    unknown = sorted(set(fields) - set(FIELDS))
    if unknown:
        raise ConfigError(f"manifest {rel}: unknown field(s) {unknown}; expected {FIELDS}")
    manifest = _defaults(run_id, task_key) | dict(fields)
    manifest["artifacts"] = [_artifact_json(a) for a in manifest["artifacts"]]
    if (manifest["run_id"], manifest["task_key"]) != (run_id, task_key):
        raise ConfigError(f"manifest {rel}: run_id/task_key fields disagree with its path")
    validate(manifest, f"{store.url}/{rel}")
    store.create_json(rel, manifest)
    return manifest


def read_manifest(store: Store, rel: str) -> dict[str, Any]:
    """A manifest by its store path, validated."""
    try:
        obj = store.read_json(rel)
    except ValueError as exc:
        raise SchemaError(f"{store.url}/{rel}: manifest is not JSON ({exc})") from None
    return validate(obj, f"{store.url}/{rel}")


def load_manifest(store: Store, run_id: str, task_key: str) -> dict[str, Any] | None:
    """The committed manifest of a task, or None if the task has not committed."""
    rel = manifest_path(run_id, task_key)
    try:
        return read_manifest(store, rel)
    except FileNotFoundError:
        return None


def _is_manifest(rel: str) -> bool:
    name = rel.rsplit("/", 1)[-1]
    return rel.endswith(".json") and not name.startswith(".")


def run_ids(store: Store) -> list[str]:
    """Run ids that have a folder under runs/."""
    with store._errors("runs"):
        if not store.fs.exists(store.path("runs")):
            return []
        entries = store.fs.ls(store.path("runs"), detail=True)
    return sorted(store.rel(e["name"]).split("/")[1] for e in entries
                  if e["type"] == "directory")


def manifests(store: Store, run_id: str | None = None) -> Iterator[tuple[str, dict[str, Any]]]:
    """(path, manifest) of every committed manifest, of one run or of all runs."""
    for rid in [run_id] if run_id else run_ids(store):
        for rel in store.list(f"runs/{rid}/tasks"):
            if _is_manifest(rel):
                yield rel, read_manifest(store, rel)


def damaged_files(store: Store, rel: str, manifest: dict[str, Any],
                  listing: dict[str, dict[str, Any]], prefix: str) -> list[str]:
    """What `listing` (a `Store.find` of `prefix`) shows wrong with the data files manifest
    `rel` commits, one line each: missing, not a regular file, or of another size than the
    manifest records (truncated or rewritten after the commit). Nothing is read, contents
    are not compared; a file outside `prefix` is not checked."""
    out = []
    for i, art in enumerate(manifest.get("artifacts") or []):
        path = art.get("path") if isinstance(art, dict) else None
        if not isinstance(path, str) or not isinstance(art.get("bytes"), int):
            out.append(f"{store.where(rel)}: artifacts[{i}] names no file (path, bytes)")
            continue
        path, entry = path.strip("/"), listing.get(path.strip("/"))
        if not path.startswith(f"{prefix.strip('/')}/"):
            continue
        if entry is None:
            out.append(f"committed file {store.where(path)} is missing; manifest {rel} lists "
                       "it (deleted after its commit)")
        elif entry["type"] != "file":
            out.append(f"committed file {store.where(path)} is {entry['type']}, not a file")
        elif entry["size"] != art["bytes"]:
            out.append(f"committed file {store.where(path)} has {entry['size']:,} bytes; "
                       f"manifest {rel} records {art['bytes']:,} (truncated or changed after "
                       "its commit)")
    return out


def committed_files(store: Store, run_id: str | None = None) -> list[ArtifactRef]:
    """Data files listed by committed manifests (the only ones readers may see)."""
    from alignflow.artifacts.parquet_io import ArtifactRef

    return [ArtifactRef.from_json(a) for _, m in manifests(store, run_id)
            for a in m["artifacts"]]
