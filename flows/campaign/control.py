"""Pausing, resuming and stopping a campaign, and what `campaign status` shows.

Pause is a flag in `runs/<campaign run>/control.json`: each due round reads it in a
journalled task, so a paused campaign records its due rounds as `paused` and trains
nothing until resumed (like a CronJob's `suspend`). Stop cancels the campaign's run and
the round run in progress.
"""

from __future__ import annotations

import time

from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from alignflow.flows.journal import runs


def control_path(run_id: str) -> str:
    return f"runs/{run_id}/control.json"


def is_paused(store: Store, run_id: str) -> bool:
    rel = control_path(run_id)
    return bool(store.exists(rel) and store.read_json(rel).get("paused"))


def set_paused(store: Store, run_id: str, paused: bool) -> None:
    runs.read_run(store, run_id)
    store.write_json(control_path(run_id), {"paused": paused, "at": time.time()})


def round_runs(store: Store, run_id: str) -> list[dict]:
    """run.json of every round run of the campaign, oldest first."""
    return [m for m in api.list_runs(store) if m.get("parent_run") == run_id]


def stop(store: Store, run_id: str) -> list[str]:
    """Cancel the campaign's run and its unfinished round runs; returns what was canceled."""
    done = (runs.SUCCESSFUL, runs.CANCELED, runs.FAILED)
    canceled = [m["run_id"] for m in round_runs(store, run_id) if m["status"] not in done]
    for child in canceled:
        api.cancel(child, store=store)
    api.cancel(run_id, store=store)
    return [run_id, *canceled]


def records(store: Store, run_id: str) -> list[dict]:
    """The `round-NNNN/record` outputs (one plain dict per finished round), in order."""
    journal = runs.read_manifests(store, run_id)
    return [m["output"] for k, m in journal.items() if k.endswith("/record")]


def next_due(store: Store, run_id: str) -> float | None:
    """The due time of the newest scheduled round not yet recorded."""
    journal = runs.read_manifests(store, run_id)
    planned = [k for k in journal if k.endswith("/schedule")]
    if not planned or f"{planned[-1].rsplit('/', 1)[0]}/record" in journal:
        return None
    return journal[planned[-1]]["output"]["fields"]["due"]
