"""kill -9 of the driver of an asynchronous run in iteration 2's learn step: the batch the
generator committed ahead survives, the resumed run consumes every batch exactly once, and
it ends bitwise where a run never killed ends."""

from __future__ import annotations

import time

import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests.rl.test_rl_resume import _driver, _final_weights, _kill_during_learn

pytestmark = pytest.mark.slow
EXTRA = ["train.max_iterations=5", "async.max_staleness=1", "algo.advantage.is_correction_enable=true"]


def test_killed_async_run_loses_nothing_and_consumes_nothing_twice(rl_sets, tmp_path):
    sets = [*rl_sets, *EXTRA]
    store = tmp_path / "store"
    proc = _driver(store, "killed", sets)
    _kill_during_learn(proc, store, "killed")
    manifests = runs.read_manifests(api.open_store(str(store)), "killed")
    # batch 3 was generated ahead (policy 2) and committed before step 2 could learn
    assert "iter-0003/generate" in manifests and "iter-0002/learn" not in manifests
    time.sleep(2.5)  # the dead driver's lease expires (ALIGNFLOW_LEASE_TTL=2)
    api.resume("killed", store=str(store), executor="inline", force=True)
    after = runs.read_manifests(api.open_store(str(store)), "killed")
    assert after["iter-0003/generate"]["seq"] == manifests["iter-0003/generate"]["seq"]

    straight = _driver(store, "straight", sets)
    assert straight.wait(timeout=600) == 0, straight.stderr.read().decode()[-2000:]
    resumed, reference = _final_weights(store, "killed"), _final_weights(store, "straight")
    assert reference.keys() == resumed.keys()
    assert all(bool((reference[k] == resumed[k]).all()) for k in reference)

    cat = Catalog(str(store))
    per_step = cat.sql("""
        SELECT run_id, iteration, count(*) AS n, count(DISTINCT consumed_at_step) AS steps,
               min(consumed_at_step) AS step, max(staleness) AS staleness
        FROM rollouts GROUP BY ALL ORDER BY ALL""").to_pylist()
    for run_id in ("killed", "straight"):
        rows = [r for r in per_step if r["run_id"] == run_id]
        assert [(r["iteration"], r["n"], r["steps"], r["step"], r["staleness"]) for r in rows] \
            == [(i, 32, 1, i, min(i, 1)) for i in range(5)]
    twice = cat.sql("SELECT run_id, iteration, prompt_id, sample_idx FROM rollout_consumption "
                    "GROUP BY ALL HAVING count(*) > 1").num_rows
    assert twice == 0
