"""Text views for the CLI: the run list, a run's task table, task logs."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from alignflow.artifacts.layout import require_store
from alignflow.artifacts.store import Store
from alignflow.errors import FlowError, StoreFileRefused
from alignflow.flows.cli.clusters import simulated
from alignflow.flows.cli.follow import running_now
from alignflow.flows.control import api
from alignflow.flows.journal import integrity, runs
from alignflow.flows.trust import signing


def _when(t: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t)) if t else "-"


def _state(meta: dict) -> str:
    """The run's status; a sleeping run says when it wakes (what `tick` waits for), a run
    whose committed files no longer match their manifests says so."""
    wake = meta.get("wake_at") if meta["status"] == runs.SLEEPING else None
    damaged = f" (damaged: {len(meta['damaged'])})" if meta.get("damaged") else ""
    return (f"{meta['status']} until {_when(wake)}" if wake else meta["status"]) + \
        simulated(meta) + damaged


def _table(rows: list[list[str]]) -> str:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
                     for r in rows)


def print_runs(store: Store) -> int:
    """`alignflow ls`: one line per run; unreadable files are named on stderr."""
    require_store(store)  # a typo or a missing bucket is an error, not "no runs"
    problems: list[runs.Problem] = []
    rows = [["RUN_ID", "FLOW", "STATUS", "START", "END", "TASKS"]]
    for m in api.list_runs(store, problems):
        rows.append([m["run_id"], str(m.get("flow", "?")), _state(m), _when(m.get("created")),
                     _when(m.get("ended")), str(m["tasks"])])
    print(_table(rows) if len(rows) > 1 else f"no runs in {store.url}")
    warn(problems)
    for run_id in runs.run_listing(store)[1]:
        print(f"warning: run {run_id!r} is being deleted; finish with `alignflow delete "
              f"{run_id}`", file=sys.stderr)
    return 0


def warn(problems: list[runs.Problem]) -> None:
    """One `warning:` line per unreadable file (the rest was served)."""
    for p in problems:
        print(f"warning: {p.message} (run {p.run_id} is marked)", file=sys.stderr)


def _readable(value: Any) -> Any:
    """Journal JSON → what a person wants to see: `Record(field=...)` for tagged records
    (artifact refs as their row counts), tuples as lists."""
    if isinstance(value, list):
        return [_readable(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__tuple__" in value and len(value) == 1:
        return _readable(value["__tuple__"])
    if "__dict__" in value and len(value) == 1:
        return _readable(value["__dict__"])
    if "__type__" in value:
        name = value["__type__"].rsplit(":", 1)[-1].removeprefix("alignflow.")
        fields = value.get("fields", {})
        if name == "ArtifactRef":
            return f"<{fields.get('table')}: {fields.get('rows')} rows>"
        inner = ", ".join(f"{k}={json.dumps(_readable(v), separators=(',', ':'))}"
                          for k, v in fields.items())
        return f"{name}({inner})"
    return {k: _readable(v) for k, v in value.items()}


def summarize(output: Any, width: int = 60) -> str:
    """A one-line summary of a journalled output."""
    readable = _readable(output)
    text = readable if isinstance(readable, str) else json.dumps(
        readable, sort_keys=True, separators=(",", ":"))
    return text if len(text) <= width else text[: width - 3] + "..."


def task_rows(store: Store, run_id: str, problems: list[runs.Problem] | None = None,
              manifests: dict[str, dict] | None = None) -> list[dict]:
    """One dict per committed task (commit order), plus the failing task if the run FAILED;
    with `problems`, an unreadable manifest is noted there and left out."""
    meta = runs.read_run(store, run_id)
    changed = set(meta.get("code_changed") or [])
    current = _current_code(meta)
    rows = []
    if manifests is None:
        manifests = runs.read_manifests(store, run_id, problems)
    for key, m in manifests.items():
        if m.get("code_hash") and current.get(m["task"], m["code_hash"]) != m["code_hash"]:
            changed.add(key)
        state = "cached" if m.get("cached_from") else m["status"]
        queued = m.get("queued")
        rows.append({"key": key, "state": state, "attempts": m.get("attempts", 1),
                     "queue": None if queued is None else (m.get("started") or queued) - queued,
                     "duration": (m.get("ended") or 0) - (m.get("started") or 0),
                     "output": summarize(m.get("output")), "code_changed": key in changed})
    if meta.get("status") == runs.FAILED and meta.get("error_task"):
        rows.append({"key": meta["error_task"], "state": "FAILED", "attempts": None,
                     "queue": None, "duration": None, "output": meta.get("error") or "", "code_changed": False})
    return rows


def _current_code(meta: dict) -> dict[str, str]:
    """Task name -> code hash of the code on disk now, read as text: a flow file's, or a
    built-in flow's modules'. Nothing is imported (`status` never runs code a store names,
    and stays fast)."""
    from alignflow.flows.journal.identity import file_task_hashes
    from alignflow.flows.journal.static_hashes import flow_task_hashes
    from alignflow.flows.registry import BUILTIN

    ref = meta.get("flow_ref") or ""
    path, sep, _ = ref.rpartition(":")
    try:
        if sep and path.endswith(".py"):
            return file_task_hashes(path)
        if ref in BUILTIN:
            return flow_task_hashes(BUILTIN[ref][0].partition(":")[0])
    except (OSError, SyntaxError, ValueError):
        return {}
    return {}


def print_status(store: Store, run_id: str | None) -> int:
    """`alignflow status [RUN_ID]`: the run's header and its task table; each manifest that
    cannot be read and each committed file that no longer matches its manifest is named on
    stderr (`flows/journal/integrity.py`)."""
    require_store(store)
    run_id = _latest(store) if run_id is None else run_id
    meta = api.get_metadata(run_id, store=store)
    problems: list[runs.Problem] = []
    manifests = runs.read_manifests(store, run_id, problems)
    problems += [runs.Problem(runs.run_dir(run_id), run_id, line)
                 for line in integrity.deep(store, run_id, manifests)]
    meta["damaged"] = [p.message for p in problems]
    _print_header(store, run_id, meta)
    rows = [["TASK", "STATE", "ATTEMPTS", "QUEUED", "DURATION", "OUTPUT", "NOTE"]]
    for r in task_rows(store, run_id, manifests=manifests):
        dur = "-" if r["duration"] is None else f"{r['duration']:.2f}s"
        queue = "-" if r["queue"] is None else f"{r['queue']:.3f}s"
        rows.append([r["key"], r["state"], str(r["attempts"] or "-"), queue, dur, r["output"],
                     "code changed" if r["code_changed"] else ""])
    print(_table(rows))
    warn(problems)
    return 0


def _latest(store: Store) -> str:
    ids = runs.list_run_ids(store, [])
    if not ids:
        raise FlowError(f"no runs in store {store.url}")
    return ids[-1]


def _print_header(store: Store, run_id: str, meta: dict) -> None:
    print(f"{run_id}  flow={meta.get('flow')}  status={_state(meta)}  seed={meta.get('seed')}")
    if meta.get("error") and meta["status"] == runs.RESUMABLE:  # not a failure
        print(f"stopped, not failed ({meta['error']}); continue with `alignflow resume {run_id}`")
    elif meta.get("error"):
        print(f"error: {meta['error']}")
    unsigned = signing.verdict(meta)
    if unsigned and meta["status"] not in (runs.SUCCESSFUL, runs.CANCELED):
        print(f"trust: {unsigned}: a resume asks for the say-so on what it names "
              "(README, Security)")
    if meta["status"] == runs.RUNNING:
        for line in running_now(store, run_id):
            print(f"now: {line}")


def print_logs(store: Store, run_id: str, task_key: str | None) -> int:
    """`alignflow logs RUN_ID [TASK_KEY]`: captured stdout/stderr of tasks."""
    runs.read_run(store, run_id)
    prefix = f"runs/{run_id}/logs"
    paths = store.list(prefix, "*.log")
    if task_key is not None:
        paths = [p for p in paths if p == f"{prefix}/{task_key}.log"]
        if not paths:
            raise FlowError(f"run {run_id!r} has no log for task {task_key!r}")
    for p in paths:
        if task_key is None:
            print(f"=== {p[len(prefix) + 1:-4]} ===")
        try:  # bounded (artifacts/bounds.py); a link, FIFO or huge file is named, not read
            print(store.read_bytes(p).decode(errors="replace"), end="")
        except StoreFileRefused as exc:
            print(f"warning: {exc}", file=sys.stderr)
    return 0


def warn_unreadable(store: Store) -> None:
    """Name the runs `tick` and `resume --all` passed over because a file of theirs cannot
    be used (the others were served)."""
    problems: list[runs.Problem] = []
    runs.list_run_ids(store, problems)
    warn(problems)
