"""Rows of the `runs` and `tasks` tables, from run records and task manifests, and how
they are loaded into the catalog's database (no Arrow: building an Arrow array from Python
values imports pandas, a third of a second of `alignflow sql`)."""

from __future__ import annotations

import json
import math
from datetime import datetime
from typing import Any

import duckdb

from alignflow.artifacts.redact import redact

RUNS_COLUMNS: dict[str, str] = dict([  # name -> SQL type
    ("run_id", "VARCHAR"), ("flow", "VARCHAR"), ("status", "VARCHAR"),
    ("seed", "BIGINT"), ("parent_run", "VARCHAR"), ("code_version", "VARCHAR"),
    ("code", "VARCHAR"), ("started", "DOUBLE"), ("ended", "DOUBLE"),
    ("error", "VARCHAR"), ("config", "VARCHAR"), ("problem", "VARCHAR"),
    ("active", "DOUBLE"),
    ("simulated", "VARCHAR"), ("drivers", "BIGINT"), ("given", "VARCHAR"),
])
TASKS_COLUMNS: dict[str, str] = dict([  # name -> SQL type
    ("run_id", "VARCHAR"), ("task_key", "VARCHAR"), ("task", "VARCHAR"),
    ("version", "BIGINT"), ("status", "VARCHAR"), ("attempts", "BIGINT"),
    ("started", "DOUBLE"), ("ended", "DOUBLE"), ("seed", "BIGINT"),
    ("code_hash", "VARCHAR"), ("input_hash", "VARCHAR"), ("worker", "VARCHAR"),
    ("checkpoint", "VARCHAR"), ("output", "VARCHAR"), ("artifacts", "VARCHAR"),
    ("rows", "BIGINT"), ("manifest", "VARCHAR"), ("queued", "DOUBLE"),
    ("settled", "DOUBLE"),
])


def blank_run(run_id: str, messages: list[str]) -> dict[str, Any]:
    row: dict[str, Any] = {name: None for name in RUNS_COLUMNS}
    return row | {"run_id": run_id, "problem": "; ".join(messages) or None}


def run_row(rel: str, run: dict[str, Any]) -> dict[str, Any]:
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
        "drivers": _int(run.get("drivers")),  # drives so far: > 1 when it was resumed
        "given": _json(run.get("given")),  # the keys the user set -> where (a flag, YAML)
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


_TASK_INTS, _TASK_TIMES = ("version", "attempts", "seed"), ("started", "ended", "queued", "settled")


def check_task(m: dict[str, Any]) -> None:
    """Raise what `task_row` raises on manifest `m` (a number it cannot take), without
    making the row: rows are made only where the `tasks` view is built (10,000 rows cost
    ~0.1 CPU s of an `alignflow sql` that reads only `rollouts`)."""
    for key in _TASK_INTS:
        _int(m.get(key))
    for key in _TASK_TIMES:
        _epoch(m.get(key))
    for art in m.get("artifacts") or []:
        int(art.get("rows") or 0)


def task_row(rel: str, m: dict[str, Any]) -> dict[str, Any]:
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
        try:
            v = float(v)
        except OverflowError:  # an integer past a double's range
            return None
        return v if math.isfinite(v) else None
    try:
        return datetime.fromisoformat(str(v)).timestamp()
    except ValueError:
        return None


def load_rows(con: duckdb.DuckDBPyConnection, name: str, rows: list[dict[str, Any]],
              columns: dict[str, str]) -> None:
    """Table `name` of `rows` (`columns`: name -> type), one column list per parameter."""
    select = ", ".join(f"unnest(?::{t}[]) AS {c}" for c, t in columns.items())
    values = [[row.get(c) for row in rows] for c in columns]
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT {select}", values)
