"""Dynamic filtering refills (OpenRLHF's over-sampling): an iteration draws prompts in
rounds until `rollout.batch_size` groups pass, and learns from the first ones — the groups
OpenRLHF v0.9.0's loop keeps (`trainer/ppo_trainer.py` `fit`: sample rounds of
vllm_generate_batch_size prompts, keep groups with min < mean score < max in order, train on
the first rollout_batch_size) — the same after a rerun from the middle of a refill."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from alignflow.catalog.catalog import Catalog
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow

pytestmark = pytest.mark.slow
B, N, LOW, HIGH = 4, 4, 0.08, 1.0


def openrlhf_kept(groups: list[tuple[str, float]], wanted: int) -> list[str]:
    """v0.9.0: groups (prompt, mean score) in draw order; the first `wanted` inside."""
    return [p for p, mean in groups if LOW < mean < HIGH][:wanted]


def _sets(tiny_model_dir) -> list[str]:
    return [f"actor.model_name_or_path={tiny_model_dir}", "data.max_samples=64",
            f"rollout.batch_size={B}", f"rollout.n_samples_per_prompt={N}",
            "rollout.max_new_tokens=8", "rollout.micro_batch_size=16",
            "data.apply_chat_template=true", "algo.kl.init_coef=0",
            "reward.sources=rule:target:e", "train.batch_size=16", "train.micro_batch_size=8",
            "actor.adam.lr=1e-2", "actor.lr_warmup_ratio=0", "num_threads=1",
            "train.max_iterations=3", "algo.dynamic_filtering_enable=true",
            f"algo.dynamic_filtering_range={LOW},{HIGH}", f"rollout.vllm_generate_batch_size={B}"]


def _drawn(cat: Catalog, run: str, it: int) -> list[tuple[str, float]]:
    """The iteration's groups in draw order: its rounds by task key, prompts by position."""
    rows = cat.sql("""
        SELECT r.task_key, p.position, r.prompt_id, avg(r.reward) AS mean
        FROM rollouts r JOIN prompts p ON p.run_id = r.run_id AND p.prompt_id = r.prompt_id
        WHERE r.run_id = ? AND r.iteration = ? GROUP BY ALL""", [run, it]).to_pylist()
    rounds = sorted({r["task_key"] for r in rows}, key=lambda k: (len(k), k))
    order = {k: i for i, k in enumerate(rounds)}
    rows.sort(key=lambda r: (order[r["task_key"]], r["position"]))
    return [(r["prompt_id"], r["mean"]) for r in rows]


def test_an_iteration_refills_until_enough_groups_pass(tiny_model_dir, tmp_path):
    flow, cls = load_flow("grpo")
    out = api.run(flow, load_config(cls, sets=_sets(tiny_model_dir)), store=str(tmp_path),
                  executor="inline", seed=1, run_id="refill")
    assert out["iterations"] == 3
    cat = Catalog(str(tmp_path))
    keys = {r["task_key"] for r in cat.sql("SELECT task_key FROM tasks WHERE run_id = 'refill'"
                                           ).to_pylist()}
    assert "iter-0000/generate-1" in keys  # some groups failed: a second round was drawn
    for it in range(3):
        learned = cat.sql("SELECT DISTINCT prompt_id FROM rollouts WHERE run_id = 'refill' "
                          "AND iteration = ? AND advantages IS NOT NULL", [it]).column(0)
        assert sorted(learned.to_pylist()) == sorted(openrlhf_kept(_drawn(cat, "refill", it), B))
    rate = cat.sql("SELECT value FROM metrics WHERE run_id = 'refill' AND "
                   "key = 'rollout/dynamic_filtering_pass_rate'").column(0).to_pylist()
    assert len(rate) == 3 and all(0 < r <= 100 for r in rate)

    final = load_file(tmp_path / "runs" / "refill" / "final" / "actor" / "model.safetensors")
    api.resume("refill", store=str(tmp_path), executor="inline", rerun_from="iter-0001/generate")
    again = load_file(tmp_path / "runs" / "refill" / "final" / "actor" / "model.safetensors")
    assert all(bool((final[k] == again[k]).all()) for k in final)
    rerun = {r["task_key"] for r in cat.sql("SELECT task_key FROM tasks WHERE run_id = "
                                            "'refill'").to_pylist()}
    assert rerun == keys  # the same rounds, drawn from the same prompts


def test_ppo_refills_and_its_critic_learns_the_kept_samples(tiny_model_dir, tmp_path):
    """With a critic the values of every drawn sample are computed, and the critic regresses
    only on the returns of the samples the actor learned from (`learn_critic`)."""
    flow, cls = load_flow("ppo")
    sets = [*_sets(tiny_model_dir), "train.max_iterations=2", "critic.adam.lr=1e-2",
            "critic.lr_warmup_ratio=0"]
    out = api.run(flow, load_config(cls, sets=sets), store=str(tmp_path), executor="inline",
                  seed=1, run_id="ppo-refill")
    assert out["iterations"] == 2
    cat = Catalog(str(tmp_path))
    keys = {r["task_key"] for r in cat.sql("SELECT task_key FROM tasks WHERE run_id = "
                                           "'ppo-refill'").to_pylist()}
    assert {"iter-0000/generate-1", "iter-0000/learn_critic", "iter-0001/learn_critic"} <= keys
    for it in range(2):
        drawn = cat.sql("SELECT count(*) FROM rollouts WHERE run_id = 'ppo-refill' AND "
                        "iteration = ?", [it]).column(0)[0].as_py()
        learned = cat.sql("SELECT count(*) FROM rollouts WHERE run_id = 'ppo-refill' AND "
                          "iteration = ? AND advantages IS NOT NULL", [it]).column(0)[0].as_py()
        assert learned == B * N <= drawn
