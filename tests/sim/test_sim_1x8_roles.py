"""Roles on GPUs of their own, and DeepSpeed ZeRO over ranks, on a simulated 1×8 cluster:
PPO with the critic and a reward model on their own GPUs (one worker each: bitwise the
single-process run; the critic starts from the reward model, as OpenRLHF's scripts do: a
value head initialised afresh draws from its process's RNG, which differs by layout), DPO under ZeRO-2 and ZeRO-3 on 2 ranks (against ZeRO on 1 rank, within
the reorder bound of `checks.reorder_atol`)."""

from __future__ import annotations

import pytest

from tests.sim.checks import (
    assert_close_weights,
    assert_same_rollouts,
    gpus_of,
    planned,
    recorded_plan,
    reorder_atol,
    weights,
)

pytestmark = pytest.mark.slow
DPO_LR, DPO_STEPS = 1e-3, 2


def _simulate(simulated, sim_store, flow: str, run_id: str, sets: list[str]):
    res = simulated.use("1x8").run(flow, sets, sim_store, run_id)
    assert res["error"] is None, res["error"]
    plan, record = recorded_plan(sim_store, run_id)
    assert plan == planned(flow, sets, "1x8") and record["cluster"] == "1x8"
    return plan, gpus_of(res["sightings"])


def test_ppo_with_critic_and_reward_model_on_their_own_gpus(simulated, sim_store, baselines,
                                                           tiny_model_dir, tiny_rm_dir):
    sets = [f"actor.model_name_or_path={tiny_model_dir}", f"reward.model_name_or_path="
            f"{tiny_rm_dir}", "reward.sources=[]", f"critic.model_name_or_path={tiny_rm_dir}", "data.max_samples=64", "rollout.batch_size=8",
            "rollout.n_samples_per_prompt=2", "rollout.max_new_tokens=8",
            "rollout.micro_batch_size=8", "train.batch_size=16", "train.micro_batch_size=8",
            "actor.adam.lr=1e-2", "critic.adam.lr=1e-2", "actor.lr_warmup_ratio=0",
            "critic.lr_warmup_ratio=0", "num_threads=1", "train.max_iterations=2",
            "algo.kl.init_coef=0.01", "rollout.engine=hf", "placement.num_cpus=0.5"]
    apart = [*sets, "train.colocate_all=false"]
    plan, gpus = _simulate(simulated, sim_store, "ppo", "ppo-apart", apart)
    assert {h.name: (h.roles, h.workers, h.gpus_per_worker) for h in plan.hosts} == {
        "actor": (("actor",), 1, 1), "ref": (("ref",), 1, 1), "critic": (("critic",), 1, 1),
        "reward": (("reward",), 1, 1)} and plan.gpus == 4
    assert all(len(gpus[f"host {h}"]) == 1 for h in ("actor", "ref", "critic", "reward"))
    one = baselines.run("ppo", "ppo", sets)  # every role in this process
    assert_same_rollouts(sim_store, "ppo-apart", baselines.store, one, logprob_atol=0)
    assert_close_weights(weights(sim_store, "ppo-apart"), weights(baselines.store, one), 0)


@pytest.mark.parametrize("stage", [2, 3])
def test_dpo_under_zero_on_two_ranks(stage, simulated, sim_store, baselines, base_sets,
                                     pairs_file):
    pytest.importorskip("deepspeed")
    sets = [*base_sets, f"data.dataset={pairs_file}", f"train.max_steps={DPO_STEPS}",
            f"adam.lr={DPO_LR}", f"ds.zero_stage={stage}", "data.apply_chat_template=false"]
    ranks = [*sets, "placement.num_gpus=1", "placement.num_gpus_per_node=2",
             "placement.num_cpus=0.5"]
    plan, gpus = _simulate(simulated, sim_store, "dpo", f"zero{stage}", ranks)
    (host,) = plan.hosts
    assert (host.workers, host.gpus_per_worker, plan.trainer("model").describe()) == (
        2, 1, f"deepspeed zero-{stage}")
    assert len(gpus["host policy"]) == 2 and {n for n, _ in gpus["host policy"]} == {0}
    assert (sim_store / f"runs/zero{stage}/checkpoints/train-0000/ranks/rank-00001").is_dir()
    one = baselines.run(f"dpo-zero{stage}", "dpo", sets)  # ZeRO on one rank
    atol = reorder_atol(steps=DPO_STEPS, lr=DPO_LR, terms=256)  # 8 pairs × 2 × ≤ 16 tokens
    assert_close_weights(weights(sim_store, f"zero{stage}", "model"),
                         weights(baselines.store, one, "model"), atol)
