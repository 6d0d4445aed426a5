"""Scan a store's committed state: run records, task manifests and the files they list.

A data file is visible to SQL only if a committed manifest lists it, so the catalog never
globs data folders: it lists `runs/`, reads every `run.json` and every manifest (one batched
`cat`, concurrent on S3), and keeps the listed paths. Orphans are never seen.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from alignflow.artifacts.commit import validate
from alignflow.artifacts.s3errors import translate_errors
from alignflow.artifacts.store import Store
from alignflow.errors import SchemaError, StoreError

RUNS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("flow", pa.string()), ("status", pa.string()),
    ("seed", pa.int64()), ("parent_run", pa.string()), ("code_version", pa.string()),
    ("started", pa.float64()), ("ended", pa.float64()), ("error", pa.string()),
    ("config", pa.string()),
])
TASKS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("task_key", pa.string()), ("task", pa.string()),
    ("version", pa.int64()), ("status", pa.string()), ("attempts", pa.int64()),
    ("started", pa.float64()), ("ended", pa.float64()), ("seed", pa.int64()),
    ("code_hash", pa.string()), ("input_hash", pa.string()), ("worker", pa.string()),
    ("checkpoint", pa.string()), ("output", pa.string()), ("artifacts", pa.string()),
    ("rows", pa.int64()), ("manifest", pa.string()),
])


@dataclass
class Snapshot:
    """What a scan found: small tables for `runs`/`tasks`, and files per data table."""

    runs: pa.Table
    tasks: pa.Table
    files: dict[str, list[str]] = field(default_factory=dict)  # table -> store-relative paths


def scan(store: Store) -> Snapshot:
    """Read the committed state of every run in `store`."""
    with translate_errors(store.url):
        if not store.fs.exists(store.root):
            err = StoreError(f"no store at {store.url}: the path does not exist; expected a "
                             "store written by alignflow (--store URL or $ALIGNFLOW_STORE)")
            err.kind = "user"
            raise err
    rels = store.list("runs")
    run_rels = [r for r in rels if _is_run_json(r)]
    manifest_rels = [r for r in rels if _is_manifest(r)]
    blobs = _read_all(store, run_rels + manifest_rels)
    runs = [_run_row(rel, _parse(rel, blobs[rel])) for rel in run_rels]
    tasks, files = [], {}
    for rel in manifest_rels:
        manifest = validate(_parse(rel, blobs[rel]), f"{store.url}/{rel}")
        tasks.append(_task_row(rel, manifest))
        for art in manifest.get("artifacts") or []:
            files.setdefault(art["table"], []).append(art["path"])
    return Snapshot(_table(runs, RUNS_SCHEMA), _table(tasks, TASKS_SCHEMA),
                    {t: sorted(set(p)) for t, p in files.items()})


def _is_run_json(rel: str) -> bool:
    parts = rel.split("/")
    return len(parts) == 3 and parts[2] == "run.json"


def _is_manifest(rel: str) -> bool:
    parts = rel.split("/")
    return (len(parts) >= 4 and parts[2] == "tasks" and parts[-1].endswith(".json")
            and not parts[-1].startswith("."))


def _read_all(store: Store, rels: list[str]) -> dict[str, bytes]:
    """All files at once: fsspec's multi-path `cat` runs concurrently on async filesystems."""
    if not rels:
        return {}
    full = {store.path(r): r for r in rels}
    with translate_errors(store.url):
        got = store.fs.cat(list(full), on_error="raise")
    return {full[store.fs._strip_protocol(p)]: data for p, data in got.items()}


def _parse(rel: str, data: bytes) -> dict[str, Any]:
    try:
        obj = json.loads(data)
    except ValueError as exc:
        raise SchemaError(f"{rel} is not valid JSON ({exc}); expected a run record or "
                          "manifest") from None
    if not isinstance(obj, dict):
        raise SchemaError(f"{rel} holds a {type(obj).__name__}; expected a JSON object")
    return obj


def _run_row(rel: str, run: dict[str, Any]) -> dict[str, Any]:
    return {
        "run_id": run.get("run_id") or rel.split("/")[1],
        "flow": _str(run.get("flow") or run.get("flow_name")),
        "status": _str(run.get("status")),
        "seed": _int(run.get("seed")),
        "parent_run": _str(run.get("parent_run") or run.get("parent")),
        "code_version": _str(run.get("code_version")),
        "started": _epoch(run.get("started")),
        "ended": _epoch(run.get("ended")),
        "error": _str(run.get("error")),
        "config": _json(run.get("config")),
    }


def _task_row(rel: str, m: dict[str, Any]) -> dict[str, Any]:
    parts = rel.split("/")
    artifacts = m.get("artifacts") or []
    return {
        "run_id": m.get("run_id") or parts[1],
        "task_key": m.get("task_key") or "/".join(parts[3:])[: -len(".json")],
        "task": _str(m.get("task")), "version": _int(m.get("version")),
        "status": _str(m.get("status")), "attempts": _int(m.get("attempts")),
        "started": _epoch(m.get("started")), "ended": _epoch(m.get("ended")),
        "seed": _int(m.get("seed")), "code_hash": _str(m.get("code_hash")),
        "input_hash": _str(m.get("input_hash")), "worker": _str(m.get("worker")),
        "checkpoint": _str(m.get("checkpoint")), "output": _json(m.get("output")),
        "artifacts": _json(artifacts),
        "rows": sum(int(a.get("rows") or 0) for a in artifacts),
        "manifest": rel,
    }


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _int(v: Any) -> int | None:
    return None if v is None or isinstance(v, bool) else int(v)


def _json(v: Any) -> str | None:
    return None if v is None else json.dumps(v, sort_keys=True)


def _epoch(v: Any) -> float | None:
    """Seconds since the epoch from a number or an ISO-8601 string."""
    if v is None:
        return None
    if isinstance(v, int | float):
        return float(v) if math.isfinite(v) else None
    try:
        return datetime.fromisoformat(str(v)).timestamp()
    except ValueError:
        return None
