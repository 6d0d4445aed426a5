"""Scan a store's committed state: run records, task manifests and the files they list.

A data file is visible to SQL only if a committed manifest lists it, so the catalog never
globs data folders: it lists `runs/`, reads every `run.json` and every manifest (one batched
read, concurrent on S3, each file bounded in size and nesting: artifacts/bounds.py), and
keeps the listed paths. Orphans are never seen.

One bad file never hides the rest of the store: a run record or manifest that cannot be
read or parsed, is too big or too deep, a link, FIFO or device anywhere in a run (never
followed or opened), or a listed path that leaves the store, becomes a `Problem` naming the
file; its run is marked (`runs.problem`) and everything else is served.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import pyarrow as pa

from alignflow.artifacts.bounds import parse_json
from alignflow.artifacts.commit import tombstoned, validate
from alignflow.artifacts.layout import require_store
from alignflow.artifacts.redact import redact
from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError, SchemaError, StoreFileRefused

_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_RESERVED = {"runs", "tasks"}
RUNS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("flow", pa.string()), ("status", pa.string()),
    ("seed", pa.int64()), ("parent_run", pa.string()), ("code_version", pa.string()),
    ("code", pa.string()), ("started", pa.float64()), ("ended", pa.float64()),
    ("error", pa.string()), ("config", pa.string()), ("problem", pa.string()),
    ("active", pa.float64()),
    ("simulated", pa.string()),
])
TASKS_SCHEMA = pa.schema([
    ("run_id", pa.string()), ("task_key", pa.string()), ("task", pa.string()),
    ("version", pa.int64()), ("status", pa.string()), ("attempts", pa.int64()),
    ("started", pa.float64()), ("ended", pa.float64()), ("seed", pa.int64()),
    ("code_hash", pa.string()), ("input_hash", pa.string()), ("worker", pa.string()),
    ("checkpoint", pa.string()), ("output", pa.string()), ("artifacts", pa.string()),
    ("rows", pa.int64()), ("manifest", pa.string()), ("queued", pa.float64()),
    ("settled", pa.float64()),
])


@dataclass(frozen=True)
class Problem:
    """A store file the catalog had to leave out: its path, its run and one line why."""

    path: str  # store-relative
    run_id: str | None
    message: str  # names the file by its full URL


@dataclass
class Snapshot:
    """What a scan found: rows for `runs`/`tasks`, files per data table, and the files that
    could not be used (each left out, named, and marked on its run); for checking the data
    files (catalog/verify.py): the listing (path -> type, size) and each file's manifest entry."""

    runs: list[dict[str, Any]]
    tasks: pa.Table
    files: dict[str, list[str]] = field(default_factory=dict)  # table -> store-relative paths
    problems: list[Problem] = field(default_factory=list)
    listing: dict[str, dict[str, Any]] = field(default_factory=dict)
    refs: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> artifact entry

    def runs_table(self, extra: list[Problem] = ()) -> pa.Table:
        """The `runs` rows, each with the problems of its files (`problem` column)."""
        by_run: dict[str, list[str]] = {}
        for p in [*self.problems, *extra]:
            by_run.setdefault(p.run_id or "", []).append(p.message)
        rows = [dict(r, problem="; ".join(by_run.get(r["run_id"], [])) or None)
                for r in self.runs]
        known = {r["run_id"] for r in rows}
        rows += [_blank_run(rid, msgs) for rid, msgs in by_run.items() if rid and rid not in known]
        return pa.Table.from_pylist(rows, schema=RUNS_SCHEMA)


def scan(store: Store) -> Snapshot:
    """Read the committed state of every run in `store`; unreadable files become problems."""
    require_store(store)
    listing = store.find("runs")
    deleting = tombstoned(list(listing))  # runs being deleted are gone already
    snap = Snapshot([], pa.table({}), listing={r: i for r, i in listing.items()
                                              if run_of(r) not in deleting})
    rels = [r for r, i in snap.listing.items() if i["type"] == "file"]
    snap.problems += [_odd(store, r, i) for r, i in snap.listing.items() if i["type"] != "file"]
    run_rels = [r for r in rels if _is_run_json(r)]
    manifest_rels = [r for r in rels if _is_manifest(r)]
    blobs = store.read_many(run_rels + manifest_rels)
    for rel in run_rels:
        row = _use(store, rel, blobs, snap.problems, lambda obj, rel=rel: _run_row(rel, obj))
        snap.runs.append(row or _blank_run(run_of(rel), []))
    tasks: list[dict[str, Any]] = []
    for rel in manifest_rels:
        entry = _use(store, rel, blobs, snap.problems,
                     lambda obj, rel=rel: _manifest_entry(store, rel, obj))
        if entry:
            tasks.append(entry[0])
            _add_files(store, rel, entry[1], snap)
    snap.tasks = _table(tasks, TASKS_SCHEMA)
    snap.files = {t: sorted(set(p)) for t, p in snap.files.items()}
    return snap


def _use(store: Store, rel: str, blobs: dict[str, Any], problems: list[Problem], make):
    """`make(parsed JSON)`, or None with a problem naming the file when it cannot be used."""
    data = blobs.get(rel)
    if isinstance(data, BaseException):
        text = _one_line(data) if isinstance(data, StoreFileRefused) else \
            f"cannot read {store.url}/{rel}: {_one_line(data)}"
        problems.append(Problem(rel, run_of(rel), text))
        return None
    try:
        return make(_parse(f"{store.url}/{rel}", data) if isinstance(data, bytes) else data)
    except (SchemaError, ValueError, TypeError, KeyError, AttributeError) as exc:
        text = _one_line(exc)
        where = f"{store.url}/{rel}"
        problems.append(Problem(rel, run_of(rel), text if where in text else f"{where}: {text}"))
        return None


def _manifest_entry(store: Store, rel: str, obj: dict[str, Any]) -> tuple[dict, dict]:
    """(its `tasks` row, the validated manifest)."""
    manifest = validate(obj, f"{store.url}/{rel}")
    return _task_row(rel, manifest), manifest


def _add_files(store: Store, rel: str, manifest: dict[str, Any], snap: Snapshot) -> None:
    """Files a manifest lists; a path that leaves the store or is not one Parquet file, or a
    table name that is not plain or is ours (`runs`, `tasks`, `_af_*`), is a problem."""
    for art in manifest.get("artifacts") or []:
        path, table = str(art["path"]), str(art["table"])
        try:
            store.path(path)
            if not path.endswith(".parquet") or any(c in path for c in "*?[{"):
                raise ConfigError(f"artifact path {path!r}: expected one .parquet file, no "
                                  "folder or glob")
            if not _TABLE_NAME.match(table) or table in _RESERVED or table.startswith("_af_"):
                raise ConfigError(f"table name {table!r}: expected lower-case letters, digits "
                                  "and _, not runs, tasks or _af_*")
        except ConfigError as exc:
            snap.problems.append(Problem(rel, run_of(rel), f"{store.url}/{rel}: {exc}"))
            continue
        snap.files.setdefault(table, []).append(path.strip("/"))
        snap.refs[path.strip("/")] = art


def _odd(store: Store, rel: str, info: dict[str, Any]) -> Problem:
    """A link, FIFO or device in the store, as a problem of its run (never followed or
    opened); a run folder that is a link still gets its (blank, marked) `runs` row."""
    return Problem(rel, run_of(rel), f"{store.where(rel)} is {info['type']}; a store holds "
                   "only regular files and folders, and alignflow never follows a link in it; "
                   "left out")


def run_of(rel: str) -> str | None:
    """The run a store path belongs to (`runs/<run_id>/...`)."""
    parts = rel.split("/")
    return parts[1] if len(parts) > 1 and parts[0] == "runs" else None


def _blank_run(run_id: str, messages: list[str]) -> dict[str, Any]:
    row: dict[str, Any] = {name: None for name in RUNS_SCHEMA.names}
    return row | {"run_id": run_id, "problem": "; ".join(messages) or None}


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _is_run_json(rel: str) -> bool:
    parts = rel.split("/")
    return len(parts) == 3 and parts[2] == "run.json"


def _is_manifest(rel: str) -> bool:
    parts = rel.split("/")
    return (len(parts) >= 4 and parts[2] == "tasks" and parts[-1].endswith(".json")
            and not parts[-1].startswith("."))


def _parse(where: str, data: bytes) -> dict[str, Any]:
    try:
        obj = parse_json(data, where)
    except StoreFileRefused:
        raise
    except SchemaError as exc:
        raise SchemaError(f"{exc}; expected a run record or manifest") from None
    if not isinstance(obj, dict):
        raise SchemaError(f"{where} holds a {type(obj).__name__}; expected a JSON object")
    return obj


def _run_row(rel: str, run: dict[str, Any]) -> dict[str, Any]:
    """A `runs` row from run.json as the engine writes it (`created`, `code`; see
    flows/control/api.py `run()`), also reading `started` / `code_version` where a writer uses them."""
    code = run.get("code")
    return {
        "run_id": rel.split("/")[1],
        "flow": _str(run.get("flow") or run.get("flow_name")),
        "status": _str(run.get("status")),
        "seed": _int(run.get("seed")),
        "parent_run": _str(run.get("parent_run") or run.get("parent")),
        "code_version": _str(run.get("code_version")) or _code_version(code),
        "code": _json(code),
        "started": _epoch(run.get("created", run.get("started"))),
        "ended": _epoch(run.get("ended")),
        "error": redact(_str(run.get("error"))),
        "config": _json(run.get("config")),
        "problem": None,
        "active": _epoch(run.get("active")),  # seconds its drivers ran (older runs: none)
        "simulated": _simulated(run.get("simulated")),
    }


def _simulated(record: Any) -> str | None:
    """`NxG` of a run rehearsed on a simulated cluster (run.json `simulated.cluster`)."""
    return _str(record.get("cluster")) if isinstance(record, dict) else None


def _code_version(code: Any) -> str | None:
    """The git commit the run's code came from, else the sha256 of its flow file."""
    if isinstance(code, str):
        return code
    if not isinstance(code, dict):
        return None
    if code.get("git_commit"):
        return str(code["git_commit"])
    return f"sha256:{code['flow_sha256']}" if code.get("flow_sha256") else None


def _task_row(rel: str, m: dict[str, Any]) -> dict[str, Any]:
    parts = rel.split("/")
    artifacts = m.get("artifacts") or []
    return {
        "run_id": parts[1],
        "task_key": m.get("task_key") or "/".join(parts[3:])[: -len(".json")],
        "task": _str(m.get("task")), "version": _int(m.get("version")),
        "status": _str(m.get("status")), "attempts": _int(m.get("attempts")),
        "started": _epoch(m.get("started")), "ended": _epoch(m.get("ended")),
        "seed": _int(m.get("seed")), "code_hash": _str(m.get("code_hash")),
        "input_hash": _str(m.get("input_hash")), "worker": _str(m.get("worker")),
        "checkpoint": _str(m.get("checkpoint")), "output": _json(m.get("output")),
        "artifacts": _json(artifacts),
        "rows": sum(int(a.get("rows") or 0) for a in artifacts),
        "manifest": rel, "queued": _epoch(m.get("queued")), "settled": _epoch(m.get("settled")),
    }


def _table(rows: list[dict[str, Any]], schema: pa.Schema) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=schema)


def _str(v: Any) -> str | None:
    return None if v is None else str(v)


def _int(v: Any) -> int | None:
    if v is None or isinstance(v, bool):
        return None
    n = int(v)
    if not -(2**63) <= n < 2**63:
        raise ValueError(f"integer {n} out of range")
    return n


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
