"""Catalog views over memory and local stores: committed rows only, across runs."""

from __future__ import annotations

import json
import threading

import pytest

from alignflow.artifacts import schemas
from alignflow.artifacts.commit import commit
from alignflow.artifacts.parquet_io import write_table
from alignflow.artifacts.store import Store
from alignflow.catalog.catalog import Catalog
from alignflow.errors import ConfigError, StoreError
from tests.fast.test_catalog_data import REWARDS, T0, populate


@pytest.fixture
def catalog(fast_store):
    populate(fast_store)
    with Catalog(fast_store) as cat:
        yield cat


def test_views_list(catalog):
    assert catalog.tables() == ["campaign_inputs", "campaign_rounds", "campaigns",
                                "checkpoints", "memory_peaks", "metrics", "preferences",
                                "rollouts", "rounds",
                                "runs", "sft_samples", "tasks"]


def test_only_committed_rows_are_visible(catalog):
    got = catalog.sql("SELECT count(*) AS n, sum(reward) AS s, max(reward) AS m FROM rollouts")
    every = [r for run in REWARDS.values() for rs in run.values() for r in rs]
    assert got.to_pylist() == [{"n": 12, "s": sum(every), "m": 14.0}]  # orphan has 100.0


def test_union_across_runs_mean_reward_per_iteration(catalog):
    got = catalog.sql("SELECT run_id, iteration, avg(reward) AS r FROM rollouts "
                      "GROUP BY ALL ORDER BY ALL").to_pylist()
    assert got == [{"run_id": "r1", "iteration": 0, "r": 2.0},
                   {"run_id": "r1", "iteration": 1, "r": 3.0},
                   {"run_id": "r2", "iteration": 0, "r": 12.0},
                   {"run_id": "r2", "iteration": 1, "r": 13.0}]


def test_rollouts_have_one_iteration_column_and_describe_shows_every_column(catalog):
    from alignflow.catalog.output import render_table

    columns = [r["column_name"] for r in catalog.sql("DESCRIBE rollouts").to_pylist()]
    assert "iteration" in columns and "iter" not in columns  # not the Hive partition key too
    shown = render_table(catalog.sql("DESCRIBE rollouts"))
    assert all(f"│ {c} " in shown for c in columns)  # none elided in the middle
    assert all(c in columns for c in ("reward", "advantages", "kl", "response_len"))


def test_params_are_bound(catalog):
    got = catalog.sql("SELECT count(*) AS n FROM rollouts WHERE run_id = ? AND reward > ?",
                      ["r2", 12.5])
    assert got.to_pylist() == [{"n": 3}]


def test_tasks_view(catalog):
    rows = catalog.sql("SELECT run_id, task_key, task, status, attempts, duration, rows, "
                       "output->>'samples' AS samples FROM tasks WHERE run_id = 'r1' "
                       "ORDER BY task_key").to_pylist()
    assert [(r["task_key"], r["task"], r["attempts"], r["duration"], r["rows"], r["samples"])
            for r in rows] == [
        ("iter-0000/generate", "generate", 1, 2.5, 3, "3"),
        ("iter-0000/learn", "learn", 1, 1.0, 2, None),
        ("iter-0001/generate", "generate", 2, 2.5, 3, "3"),
        ("iter-0001/learn", "learn", 1, 1.0, 2, None)]
    assert {r["status"] for r in rows} == {"SUCCESSFUL"}


def test_runs_view(catalog):
    rows = catalog.sql("SELECT run_id, flow, status, seed, duration, config->>'run' AS cfg, "
                       "epoch(started) AS t FROM runs ORDER BY run_id").to_pylist()
    assert rows == [
        {"run_id": "r1", "flow": "grpo", "status": "SUCCESSFUL", "seed": 7, "duration": 60.0,
         "cfg": "r1", "t": T0},
        {"run_id": "r2", "flow": "grpo", "status": "SUCCESSFUL", "seed": 8, "duration": 60.0,
         "cfg": "r2", "t": T0}]


def test_metrics_view(catalog):
    rows = catalog.sql("SELECT step, key, value FROM metrics WHERE run_id = 'r1' "
                       "ORDER BY step, key").to_pylist()
    # rows written with short names (runs from before the namespace) read in the namespace
    assert [(r["step"], r["key"], r["value"]) for r in rows] == [
        (0, "train/kl", 0.0), (0, "train/policy_loss", 1.0), (1, "train/kl", 0.1),
        (1, "train/policy_loss", 0.5)]


def test_one_namespace_for_metric_names():
    from alignflow.artifacts.metric_names import axis, canonical

    assert [canonical(k) for k in ("loss", "reward_mean", "score/gsm8k/correct", "gpu/actor/x",
                                   "critic/value_loss", "train/loss", "eval/loss", "entropy",
                                   "learn_seconds")] == [
        "train/policy_loss", "rollout/reward_mean", "rollout/score/gsm8k/correct",
        "perf/gpu/actor/x", "train/critic/value_loss", "train/loss", "eval/loss",
        "train/entropy", "perf/learn_seconds"]
    assert axis("train/policy_loss", "iter-0003/learn") == "iteration"
    assert axis("train/loss", "train-0002") == "step"
    assert axis("rollout/reward_mean", "round-0001/score") == "iteration"
    assert axis("train/loss", "round-0001/train-0000") == "step"


def test_empty_tables_have_schema_columns(catalog):
    for name in ("preferences", "sft_samples", "checkpoints"):
        cols = catalog.sql(f"DESCRIBE {name}").column("column_name").to_pylist()
        assert cols == schemas.SCHEMAS[name].arrow_schema.names
        assert catalog.sql(f"SELECT count(*) AS n FROM {name}").to_pylist() == [{"n": 0}]


def test_refresh_sees_new_commits(fast_store, catalog):
    ref = write_table(fast_store, "rollouts", {
        "iteration": [2], "task_key": ["iter-0002/generate"], "prompt_id": ["p"],
        "sample_idx": [0], "reward": [5.0]}, run_id="r1", task="generate",
        partition={"iter": 2})
    commit(fast_store, "r1", "iter-0002/generate", {"artifacts": [ref]})
    query = "SELECT count(*) AS n FROM rollouts WHERE iteration = 2"
    assert catalog.sql(query).to_pylist() == [{"n": 0}]
    catalog.refresh()
    assert catalog.sql(query).to_pylist() == [{"n": 1}]


def test_one_cursor_per_thread(catalog):
    results, cursors = [], set()

    def work() -> None:
        cursors.add(id(catalog.cursor()))
        for _ in range(5):
            results.append(catalog.sql("SELECT sum(reward) AS s FROM rollouts").to_pylist())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(cursors) == 4
    assert results == [[{"s": 90.0}]] * 20


def test_df(catalog):
    frame = catalog.df("SELECT run_id, count(*) AS n FROM rollouts GROUP BY 1 ORDER BY 1")
    assert frame.to_dict("list") == {"run_id": ["r1", "r2"], "n": [6, 6]}


def test_missing_store_is_one_line_user_error(tmp_path):
    with pytest.raises(StoreError, match="no store at .*nowhere") as info:
        Catalog(str(tmp_path / "nowhere"))
    assert info.value.kind == "user" and "\n" not in str(info.value)


def test_bad_sql_names_the_statement(catalog):
    with pytest.raises(ConfigError, match=r"bad SQL `SELEC 1`: Parser Error"):
        catalog.sql("SELEC 1")
    with pytest.raises(ConfigError, match=r"SQL error in `SELECT nope FROM runs`: Binder"):
        catalog.sql("SELECT nope FROM runs")


def test_catalog_opens_url(local_store):
    populate(local_store)
    with Catalog(local_store.url) as cat:
        assert isinstance(cat.store, Store)
        assert cat.sql("SELECT count(*) AS n FROM rollouts").to_pylist() == [{"n": 12}]
    assert json.loads(local_store.read_bytes("runs/r1/run.json"))["seed"] == 7


def test_rollouts_view_takes_step_columns_from_step_tables(local_store):
    """A `rollout_scores` table (keyed like the rollouts) fills `reward` in the view."""
    from alignflow.tasks.steps.tables import SCORES

    ref = write_table(local_store, "rollouts", {
        "iteration": [0, 0], "task_key": ["iter-0000/generate"] * 2, "prompt_id": ["p", "p"],
        "sample_idx": [0, 1], "response": ["a", "b"]}, run_id="r1", task="generate",
        partition={"iter": 0})
    commit(local_store, "r1", "iter-0000/generate", {"artifacts": [ref]})
    ref = write_table(local_store, SCORES, {
        "iteration": [0, 0], "task_key": ["iter-0000/score"] * 2, "prompt_id": ["p", "p"],
        "sample_idx": [1, 0], "reward": [0.25, 0.75]}, run_id="r1", task="score",
        partition={"iter": 0})
    commit(local_store, "r1", "iter-0000/score", {"artifacts": [ref]})
    with Catalog(local_store) as cat:
        got = cat.sql("SELECT sample_idx, response, reward FROM rollouts ORDER BY sample_idx")
        assert got.to_pylist() == [{"sample_idx": 0, "response": "a", "reward": 0.75},
                                   {"sample_idx": 1, "response": "b", "reward": 0.25}]
        assert "rollout_scores" in cat.tables()
