"""OpenRLHF's published hybrid layout on a simulated 1×8 cluster: 8 actor ranks
(train.colocate_all) and 4 vLLM engines × tensor parallel 2 inside their GPUs, as
OpenRLHF's launcher places them. The engines are Ray actors pinned to their trainer ranks'
fake GPUs (`engines/vllm/placement.py:hybrid_slots`), sleep while the trainer learns,
take the sync through Ray's object store, and sample contiguous shards of the prompts. The
result is held against the single-process run within the data-parallel reorder bound."""

from __future__ import annotations

import pytest

from tests.sim.checks import (
    DP_ATOL,
    SIM,
    assert_close_weights,
    assert_same_rollouts,
    planned,
    processes,
    recorded_plan,
    weights,
)

pytestmark = pytest.mark.slow
ONE = ["train.max_iterations=1", "train.micro_batch_size=2"]  # 16 rows over 8 ranks


def test_hybrid_4_engines_tp2_inside_8_actor_gpus(simulated, sim_store, baselines, grpo_sets):
    sets = [*grpo_sets, *ONE, *SIM, "train.colocate_all=true", "actor.num_gpus_per_node=8",
            "vllm.num_engines=4", "vllm.tensor_parallel_size=2", "vllm.enable_sleep=true"]
    res = simulated.use("1x8").run("grpo", sets, sim_store, "hybrid-tp2")
    assert res["error"] is None, res["error"]
    plan, record = recorded_plan(sim_store, "hybrid-tp2")
    assert plan == planned("grpo", sets, "1x8") and record["cluster"] == "1x8"
    (host,) = plan.hosts
    assert (host.workers, host.gpus_per_worker, plan.gpus) == (8, 1, 8)
    e = plan.engines
    assert (e.count, e.tensor_parallel, e.hybrid, e.gpus, e.gpus_used, e.transport) == (
        4, 2, True, 0, 8, "ray")
    procs = processes(res["sightings"]).values()
    ranks = {p["cuda_visible_devices"] for p in procs if "host models" in p["kinds"]}
    engines = [p["cuda_visible_devices"] for p in procs
               if any(k.startswith("vllm engine") for k in p["kinds"])]
    assert len(ranks) == 8 and all("," not in g for g in ranks)  # one fake GPU per rank
    assert len(engines) == 4  # four engine actors, each on two of the ranks' GPUs
    held = [g for pair in engines for g in pair.split(",")]
    assert sorted(held) == sorted(ranks)  # every actor GPU holds exactly one engine
    one = baselines.run("grpo-1it-mb2", "grpo", [*grpo_sets, *ONE, "rollout.engine=hf"])
    assert_same_rollouts(sim_store, "hybrid-tp2", baselines.store, one,
                         logprob_atol=64 * 2.0 ** -23 * 16)  # as the DP-2 hybrid test
    assert_close_weights(weights(sim_store, "hybrid-tp2"), weights(baselines.store, one),
                         DP_ATOL)
