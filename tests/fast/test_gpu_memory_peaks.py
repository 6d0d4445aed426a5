"""A step's planned GPU peak recorded beside the measured one (issue 42): the keys a step
writes, and the `memory_peaks` view over them (catalog/memory_peaks.sql)."""

from __future__ import annotations

from types import SimpleNamespace

import duckdb
import pytest
import torch

from alignflow.artifacts.metric_names import canonical
from alignflow.catalog.connection import sql_text
from alignflow.tasks.steps import gpu_memory


def _host(planned: int | None) -> SimpleNamespace:
    return SimpleNamespace(device=torch.device("cpu"), spec=SimpleNamespace(planned_peak=planned))


def test_a_cpu_step_records_the_plan_and_no_measurement():
    assert gpu_memory.peak_metrics(_host(3 << 30), "ref") == {"gpu/ref/planned_peak_gib": 3.0}
    assert gpu_memory.peak_metrics(_host(None), "ref") == {}


def _view(rows: list[tuple]) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    con.execute("CREATE TABLE metrics (run_id VARCHAR, task_key VARCHAR, step BIGINT, "
                "key VARCHAR, value DOUBLE)")
    con.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?, ?)", rows)
    con.execute(sql_text("memory_peaks"))
    return con


def test_the_view_pairs_planned_and_measured_and_says_why_one_is_missing():
    key = {k: canonical(f"gpu/{r}/{k}") for r in ("actor",) for k in ("planned_peak_gib",
                                                                    "peak_allocated_gib")}
    assert key["planned_peak_gib"] == "perf/gpu/actor/planned_peak_gib"
    con = _view([("r", "0000/learn", 0, key["planned_peak_gib"], 40.0),
                 ("r", "0000/learn", 0, key["peak_allocated_gib"], 30.0),
                 ("r", "0001/learn", 1, key["planned_peak_gib"], 40.0),
                 ("r", "0002/learn", 2, key["peak_allocated_gib"], 31.0),
                 ("r", "0000/learn", 0, "train/loss", 1.0)])
    rows = con.execute("SELECT task, role, planned_peak, measured_peak, ratio, reason "
                       "FROM memory_peaks ORDER BY task").fetchall()
    assert rows[0] == ("0000/learn", "actor", 40.0, 30.0, pytest.approx(0.75), None)
    assert rows[1][3] is None and rows[1][5].startswith("not measured: no CUDA device")
    assert rows[2][2] is None and rows[2][5].startswith("not planned")
    assert len(rows) == 3  # other metrics are not memory rows
