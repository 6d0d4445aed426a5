"""GRPO on a simulated 1×8 cluster (`--simulate-cluster 1x8`: one Ray node advertising 8
fake GPUs, NCCL-strict groups, the HF engine standing in for vLLM where it is not
installed), each layout against the single-process run: hybrid-colocated with actor DP 2,
separate engines (actor 2, ref 1, 2 engines, rule reward), LoRA, asynchronous with a
generator worker. Each asserts the plan (the one its dry run shows), the fake GPUs each
process saw, and the result: within the reorder bound for data-parallel learners
(`checks.reorder_atol`), bitwise for one worker per role."""

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
ALL = "train.colocate_all=true"  # every role on one host (unset on GPUs: apart, as OpenRLHF)
def _simulate(simulated, sim_store, run_id: str, sets: list[str], spec: str = "1x8"):
    res = simulated.use(spec).run("grpo", sets, sim_store, run_id)
    assert res["error"] is None, res["error"]
    plan, record = recorded_plan(sim_store, run_id)
    assert plan == planned("grpo", sets, spec) and record["cluster"] == spec
    return plan, gpus_of(res["sightings"])


def test_hybrid_colocated_with_actor_dp2(simulated, sim_store, baselines, grpo_sets):
    sets = [*grpo_sets, *SIM, "train.colocate_all=true", "actor.num_gpus_per_node=2",
            "vllm.num_engines=2"]  # OpenRLHF's hybrid engine: one per actor GPU
    plan, gpus = _simulate(simulated, sim_store, "hybrid-dp2", sets)
    (host,) = plan.hosts
    assert (host.roles, host.workers, host.gpus_per_worker) == (("actor", "ref", "reward"), 2, 1)
    assert host.engine.in_host and host.engine.kind == "vllm" and plan.gpus == 2
    assert host.engine.per_rank  # one engine in each rank's process, each sampling its shard
    assert len(gpus["host models"]) == 2 and {n for n, _ in gpus["host models"]} == {0}
    assert len(engine_gpus(gpus)) == 2 and engine_gpus(gpus) == gpus["host models"]
    one = baselines.run("grpo", "grpo", [*grpo_sets, "rollout.engine=hf"])
    # the same tokens; each rank's shard is left-padded to its own longest prompt, so the
    # same rows pass float32 kernels of other shapes: ≤ 64 ulp (2^-23) of |logprob| ≤ 16
    assert_same_rollouts(sim_store, "hybrid-dp2", baselines.store, one,
                         logprob_atol=64 * 2.0 ** -23 * 16)
    assert_close_weights(weights(sim_store, "hybrid-dp2"), weights(baselines.store, one),
                         DP_ATOL)


def test_separate_engines_actor2_ref1_rule_reward(simulated, sim_store, baselines, grpo_sets):
    sets = [*grpo_sets, *SIM, "train.colocate_all=false", "actor.num_gpus_per_node=2",
            "vllm.num_engines=2"]
    plan, gpus = _simulate(simulated, sim_store, "engines", sets)
    assert {h.name: (h.workers, h.gpus_per_worker) for h in plan.hosts} == {
        "actor": (2, 1), "ref": (1, 1), "reward": (1, 0)}
    e = plan.engines
    assert (e.host, e.count, e.gpus_each, e.transport, e.hybrid) == ("actor", 2, 1, "nccl", False)
    assert plan.gpus == 5 and len(gpus["host actor"]) == 2 and len(gpus["host ref"]) == 1
    assert gpus["host reward"] == [(0, "")]  # a rule reward: no model, no GPU
    assert len(engine_gpus(gpus)) == 2  # engine actors on GPUs of their own (checked: unshared)
    one = baselines.run("grpo", "grpo", [*grpo_sets, "rollout.engine=hf"])
    assert_same_rollouts(sim_store, "engines", baselines.store, one, logprob_atol=1e-5)
    assert_close_weights(weights(sim_store, "engines"), weights(baselines.store, one), DP_ATOL)


def test_lora(simulated, sim_store, baselines, grpo_sets):
    lora = ["ds.lora.rank=4", "ds.lora.alpha=8"]
    plan, gpus = _simulate(simulated, sim_store, "lora", [*grpo_sets, *SIM, *lora, ALL])
    assert plan.trainer("actor").describe() == "torch lora r4" and plan.gpus == 1
    assert engine_gpus(gpus) == gpus["host models"] == [(0, gpus["host models"][0][1])]
    one = baselines.run("grpo-lora", "grpo", [*grpo_sets, *lora, "rollout.engine=hf"])
    assert_same_rollouts(sim_store, "lora", baselines.store, one, logprob_atol=0)
    assert_close_weights(weights(sim_store, "lora"), weights(baselines.store, one), 0)


def test_async_with_a_generator_worker(simulated, sim_store, baselines, grpo_sets):
    asynchronous = ["async.max_staleness=1"]
    plan, gpus = _simulate(simulated, sim_store, "async", [*grpo_sets, *SIM, *asynchronous,
                                                            ALL])
    assert plan.generator.gpus_per_worker == 1 and plan.generator.engine.in_host
    assert plan.hosts[0].engine is None and plan.gpus == 2
    assert engine_gpus(gpus) == gpus["generator"] != gpus["host models"]
    one = baselines.run("grpo-async", "grpo", [*grpo_sets, *asynchronous, "rollout.engine=hf"])
    assert_same_rollouts(sim_store, "async", baselines.store, one, logprob_atol=0)
    assert_close_weights(weights(sim_store, "async"), weights(baselines.store, one), 0)
