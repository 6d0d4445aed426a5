"""The report's staleness panel: samples per learn step by staleness, and the batches the
bound dropped; left out for a synchronous run (every staleness 0) and a run without the
`rollout_consumption` table."""

from __future__ import annotations

import pytest

import alignflow.tasks.steps.tables  # noqa: F401  (registers rollout_consumption)
from alignflow.artifacts.commit import commit
from alignflow.artifacts.parquet_io import write_table
from alignflow.artifacts.store import Store
from alignflow.catalog.catalog import Catalog
from alignflow.catalog.report import render_report
from tests.fast.test_catalog_report import _rl_iteration, _run_json, alts, titles

TITLE = "Staleness of the data each step learned from"


def _consumed(store, run_id: str, it: int, staleness: int) -> None:
    keys = [(p, s) for p in range(2) for s in range(4)]
    ref = write_table(store, "rollout_consumption", {
        "iteration": [it] * 8, "task_key": [f"iter-{it:04d}/learn"] * 8,
        "prompt_id": [f"p{p}" for p, _ in keys], "sample_idx": [s for _, s in keys],
        "consumed_at_step": [it] * 8, "learner_version": [it] * 8,
        "staleness": [staleness] * 8}, run_id=run_id, task="learn", partition={"iter": it})
    commit(store, run_id, f"iter-{it:04d}/consumed", {"artifacts": [ref], "task": "learn"})


@pytest.fixture(scope="module")
def pages(tmp_path_factory) -> dict[str, str]:
    store = Store.open(str(tmp_path_factory.mktemp("staleness") / "store"))
    for run_id in ("async", "sync"):
        _run_json(store, run_id, "grpo")
        for it in range(3):
            _rl_iteration(store, run_id, it, 0.1)
            _consumed(store, run_id, it, min(it, 1) if run_id == "async" else 0)
    ref = write_table(store, "metrics", {"task_key": ["iter-0002/drop"], "step": [2],
                                         "key": ["dropped_batches"], "value": [1.0],
                                         "ts": [0.0]}, run_id="async", task="drop")
    commit(store, "async", "iter-0002/drop", {"artifacts": [ref], "task": "drop"})
    with Catalog(store) as cat:
        return {rid: render_report(cat, rid) for rid in ("async", "sync")}


def test_an_async_run_shows_its_staleness(pages):
    page = pages["async"]
    assert TITLE in titles(page)
    assert "samples per learn step by staleness" in alts(page)
    panel = page[page.index(f"<h2>{TITLE}</h2>"):]
    panel = panel[:panel.index("</section>")]
    assert "dropped</span></td><td><span class=\"t\">1<" in panel
    assert "rollout_consumption" in panel


def test_a_synchronous_run_has_no_staleness_panel(pages):
    assert TITLE not in titles(pages["sync"])
