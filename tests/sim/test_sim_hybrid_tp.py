"""OpenRLHF's published hybrid layouts on simulated clusters, run to the end: 8 actor ranks
(train.colocate_all) with 4 vLLM engines × tensor parallel 2 inside their GPUs on 1×8
(train_ppo_ray_hybrid_engine.sh), 8 engines × TP 1 on 1×8 (train_prorlv2_math_hybrid_
engine.sh) and 16 ranks with 8 engines × TP 2 on 2×8 (train_dapo_ray_hybrid_engine.sh on
two nodes). Each plan is held against OpenRLHF's launcher arithmetic
(`tests/fast/openrlhf_layouts.py`: engine count, where each engine sits). TP > 1: engine
actors pinned to their trainer ranks' fake GPUs (`engines/vllm/placement.py:hybrid_slots`),
synced by the handles of every rank (`vllm_ipc_group`); TP 1: an in-process engine in every rank
(`EnginePlan.per_rank`). Engines sleep while the trainer learns and sample contiguous
shards of the prompts (sizes differing by at most one: with at least as many prompts as
engines, every engine samples). The result is held against the single-process run within
the data-parallel reorder bound."""

from __future__ import annotations

import pytest

from tests.fast.openrlhf_layouts import case, layout
from tests.sim.checks import (
    DP_ATOL,
    SIM,
    assert_close_weights,
    assert_same_rollouts,
    planned,
    processes,
    recorded_plan,
    rollouts,
    weights,
)

pytestmark = pytest.mark.slow
ONE = ["train.max_iterations=1", "train.micro_batch_size=2"]  # 16 rows over 8 ranks
HYBRID = [*SIM, "train.colocate_all=true", "vllm.enable_sleep=true"]
# as the DP-2 hybrid test: each engine's shard is left-padded to its own longest prompt,
# so the same rows pass float32 kernels of other shapes: ≤ 64 ulp (2^-23) of |logprob| ≤ 16
# (from the first iteration on where a shard is smaller than the single process's batch)
LOGPROB_ATOL = 64 * 2.0 ** -23 * 16


def _per(nodes: int, gpus: int) -> list[str]:
    return [f"{role}.{key}={n}" for role in ("actor", "ref")
            for key, n in (("num_nodes", nodes), ("num_gpus_per_node", gpus))]


def _run(simulated, sim_store, spec: str, run_id: str, sets: list[str], layout_of: str):
    """The run on `spec`; its plan, checked against the dry run's and OpenRLHF's layout
    `layout_of` (the actor's GPUs, the engines and where each sits: the published scripts'
    reward and critic differ from this GRPO run's); and what each process saw."""
    res = simulated.use(spec).run("grpo", sets, sim_store, run_id)
    assert res["error"] is None, res["error"]
    print(f"{run_id}: {res['seconds']:.0f}s on {spec}")  # the measured time (-s shows it)
    plan, record = recorded_plan(sim_store, run_id)
    assert plan == planned("grpo", sets, spec) and record["cluster"] == spec
    gpus, _shared, engines = layout(plan, reward_model=False)
    want = case(layout_of)
    assert engines == want.engines and gpus["actor"] == want.gpus["actor"]
    return plan, processes(res["sightings"]).values()


def _every_engine_sampled(sim_store, run_id: str, engines: int) -> None:
    """Contiguous shards of sizes differing by ≤ 1: as many prompts as engines or more
    leaves none empty."""
    rows = rollouts(sim_store, run_id)
    per_iteration: dict[int, set] = {}
    for r in rows:
        per_iteration.setdefault(r["iteration"], set()).add(r["prompt_id"])
    assert per_iteration and all(len(p) >= engines for p in per_iteration.values())


def _engine_gpus(procs) -> list[tuple[int, str]]:
    return sorted((p["node"], p["cuda_visible_devices"]) for p in procs
                  if any(k.startswith("vllm engine") for k in p["kinds"]))


def _rank_gpus(procs) -> list[tuple[int, str]]:
    return sorted((p["node"], p["cuda_visible_devices"]) for p in procs
                  if "host models" in p["kinds"])


def test_hybrid_4_engines_tp2_inside_8_actor_gpus(simulated, sim_store, baselines, grpo_sets):
    sets = [*grpo_sets, *ONE, *HYBRID, *_per(1, 8), "vllm.num_engines=4",
            "vllm.tensor_parallel_size=2"]
    plan, procs = _run(simulated, sim_store, "1x8", "hybrid-tp2", sets, "ppo_hybrid_4xtp2_1x8")
    (host,) = plan.hosts
    assert (host.workers, host.gpus_per_worker, plan.gpus) == (8, 1, 8)
    e = plan.engines
    assert (e.count, e.tensor_parallel, e.hybrid, e.gpus, e.gpus_used, e.transport) == (
        4, 2, True, 0, 8, "ray")
    ranks, engines = _rank_gpus(procs), _engine_gpus(procs)
    assert len(set(ranks)) == 8 and all("," not in g for _, g in ranks)  # one GPU a rank
    assert len(engines) == 4  # four engine actors, each on two of the ranks' GPUs
    held = sorted((n, g) for n, pair in engines for g in pair.split(","))
    assert held == ranks  # every actor GPU holds exactly one engine
    _every_engine_sampled(sim_store, "hybrid-tp2", 4)
    one = baselines.run("grpo-1it-mb2", "grpo", [*grpo_sets, *ONE, "rollout.engine=hf"])
    assert_same_rollouts(sim_store, "hybrid-tp2", baselines.store, one,
                         logprob_atol=LOGPROB_ATOL)
    assert_close_weights(weights(sim_store, "hybrid-tp2"), weights(baselines.store, one),
                         DP_ATOL)


def _as_one_process(sim_store, run: str, baselines, key: str, sets: list[str]) -> None:
    """The run's samples and weights equal one process's (the HF engine) on the same sets."""
    one = baselines.run(key, "grpo", [*sets, "rollout.engine=hf"])
    assert_same_rollouts(sim_store, run, baselines.store, one,
                         logprob_atol=LOGPROB_ATOL, first_atol=LOGPROB_ATOL)
    assert_close_weights(weights(sim_store, run), weights(baselines.store, one), DP_ATOL)


def test_hybrid_8_engines_tp1_one_per_actor_gpu(simulated, sim_store, baselines, grpo_sets):
    sets = [*grpo_sets, *ONE, *HYBRID, *_per(1, 8), "vllm.num_engines=8"]
    plan, procs = _run(simulated, sim_store, "1x8", "hybrid-tp1", sets,
                       "grpo_hybrid_8xtp1_remote_1x8")
    (host,) = plan.hosts
    assert host.engine.per_rank and host.engine.in_host and plan.gpus == 8
    ranks, engines = _rank_gpus(procs), _engine_gpus(procs)
    assert len(set(ranks)) == 8 and engines == ranks  # an engine in every rank's process
    _every_engine_sampled(sim_store, "hybrid-tp1", 8)
    _as_one_process(sim_store, "hybrid-tp1", baselines, "grpo-1it-mb2",
                    [*grpo_sets, *ONE])


def test_hybrid_8_engines_tp2_on_two_nodes(simulated, sim_store, baselines, grpo_sets):
    # 32 rows in one minibatch over 16 ranks: 2 a rank, one micro-batch each
    batch = ["train.max_iterations=1", "train.batch_size=32", "train.micro_batch_size=2"]
    sets = [*grpo_sets, *batch, *HYBRID, *_per(2, 8), "vllm.num_engines=8",
            "vllm.tensor_parallel_size=2"]
    plan, procs = _run(simulated, sim_store, "2x8", "hybrid-2x8", sets,
                       "grpo_hybrid_8xtp2_2x8")
    (host,) = plan.hosts
    assert (host.nodes, host.workers, plan.gpus, plan.engines.count) == (2, 16, 16, 8)
    ranks, engines = _rank_gpus(procs), _engine_gpus(procs)
    assert len(set(ranks)) == 16 and {n for n, _ in ranks} == {0, 1}
    assert len(engines) == 8 and [n for n, _ in engines] == [0] * 4 + [1] * 4
    held = sorted((n, g) for n, pair in engines for g in pair.split(","))
    assert held == ranks  # every actor GPU of both nodes holds exactly one engine
    _every_engine_sampled(sim_store, "hybrid-2x8", 8)
    _as_one_process(sim_store, "hybrid-2x8", baselines, "grpo-1it-b32",
                    [*grpo_sets, *batch])
