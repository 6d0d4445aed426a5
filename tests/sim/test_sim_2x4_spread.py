"""GRPO on a simulated 2×4 cluster (two Ray nodes on this machine, 4 fake GPUs each) with
the actor group spread over both nodes (one rank per node, one bundle per node,
STRICT_SPREAD), against the single-process run within the reorder bound. Runs after the
1×8 tests (file order): the shared cluster changes shape once."""

from __future__ import annotations

import pytest

from tests.sim.checks import (
    DP_ATOL,
    SIM,
    assert_close_weights,
    assert_same_rollouts,
    engine_gpus,
    gpus_of,
    planned,
    recorded_plan,
    weights,
)

pytestmark = pytest.mark.slow


def test_the_actor_group_spread_over_both_nodes(simulated, sim_store, baselines, grpo_sets):
    sets = [*grpo_sets, *SIM, "actor.num_nodes=2", "actor.num_gpus_per_node=1",
            "train.colocate_all=true"]  # one engine (num_engines 0): rank 0's
    res = simulated.use("2x4").run("grpo", sets, sim_store, "spread")
    assert res["error"] is None, res["error"]
    plan, record = recorded_plan(sim_store, "spread")
    assert plan == planned("grpo", sets, "2x4") and record["cluster"] == "2x4"
    (host,) = plan.hosts
    assert (host.nodes, host.workers_per_node, host.gpus_per_worker) == (2, 1, 1)
    assert plan.cluster.nodes == 2 and plan.cluster.simulated
    gpus = gpus_of(res["sightings"])
    assert [n for n, _ in gpus["host models"]] == [0, 1]  # one rank on each node
    ranks = {s["rank"]: s["node"] for s in res["sightings"] if s["kind"] == "host models"}
    assert sorted(ranks) == [0, 1] and set(ranks.values()) == {0, 1}
    assert engine_gpus(gpus) == [g for g in gpus["host models"] if g[0] == ranks[0]]
    one = baselines.run("grpo", "grpo", [*grpo_sets, "rollout.engine=hf"])
    assert_same_rollouts(sim_store, "spread", baselines.store, one, logprob_atol=1e-5)
    assert_close_weights(weights(sim_store, "spread"), weights(baselines.store, one), DP_ATOL)
