"""A small, hand-checkable store for the catalog tests (imported by the other catalog tests).

Two runs, r1 and r2, each with two iterations of 3 rollouts and 2 metric rows per
iteration, all committed through the artifacts API; plus one orphan rollout file (reward
100, no manifest) that no view may show.
"""

from __future__ import annotations

import pyarrow.parquet as pq

from alignflow.artifacts.commit import commit
from alignflow.artifacts.parquet_io import write_table

RUNS = ("r1", "r2")
# rewards[run][iteration]: mean r1 it0 = 2, it1 = 3; r2 is r1 + 10
REWARDS = {"r1": {0: [1.0, 2.0, 3.0], 1: [2.0, 3.0, 4.0]},
           "r2": {0: [11.0, 12.0, 13.0], 1: [12.0, 13.0, 14.0]}}
T0 = 1_700_000_000.0


def _rollouts(run_id: str, it: int) -> dict:
    rewards = REWARDS[run_id][it]
    return {"iteration": [it] * 3, "task_key": [f"iter-{it:04d}/generate"] * 3,
            "prompt_id": ["p0", "p0", "p1"], "sample_idx": [0, 1, 0], "reward": rewards,
            "response": [f"answer {r:g} for {run_id}" for r in rewards]}


def _metrics(it: int) -> dict:
    return {"task_key": [f"iter-{it:04d}/learn"] * 2, "step": [it, it],
            "key": ["loss", "kl"], "value": [1.0 / (it + 1), 0.1 * it], "ts": [T0 + it] * 2}


def populate(store) -> dict:
    """Commit the two runs into `store`; returns {'orphan': rel path of the orphan file}."""
    for n, run_id in enumerate(RUNS):
        store.write_json(f"runs/{run_id}/run.json", {
            "run_id": run_id, "flow": "grpo", "status": "SUCCESSFUL", "seed": 7 + n,
            "started": T0, "ended": T0 + 60, "config": {"lr": 1e-5, "run": run_id}})
        for it in (0, 1):
            ref = write_table(store, "rollouts", _rollouts(run_id, it), run_id=run_id,
                              task="generate", partition={"iter": it})
            commit(store, run_id, f"iter-{it:04d}/generate", {
                "artifacts": [ref], "output": {"samples": 3}, "started": T0 + 10 * it,
                "ended": T0 + 10 * it + 2.5, "attempts": 1 + it})
            ref = write_table(store, "metrics", _metrics(it), run_id=run_id, task="learn",
                              partition={"iter": it})
            commit(store, run_id, f"iter-{it:04d}/learn", {
                "artifacts": [ref], "started": T0 + 10 * it + 3, "ended": T0 + 10 * it + 4})
    orphan = write_table(store, "rollouts", {**_rollouts("r1", 0), "reward": [100.0] * 3},
                         run_id="r1", task="generate", partition={"iter": 0})
    return {"orphan": orphan.path}


def test_populate_writes_committed_and_orphan_files(local_store):
    info = populate(local_store)
    files = local_store.list("runs", "*.parquet")
    assert len(files) == 2 * 2 * 2 + 1  # runs x iterations x (rollouts, metrics) + orphan
    assert info["orphan"] in files
    assert pq.read_table(local_store.path(info["orphan"])).column("reward").to_pylist() == [
        100.0] * 3
