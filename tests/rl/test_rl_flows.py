"""RL flows end to end on the tiny model: learning, every algorithm's tables, resume."""

from __future__ import annotations

import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow

pytestmark = pytest.mark.slow


def _run(name: str, sets: list[str], store, executor: str = "inline", seed: int = 1,
         run_id: str | None = None):
    flow, cfg_cls = load_flow(name)
    cfg = load_config(cfg_cls, sets=sets)
    return api.run(flow, cfg, store=str(store), executor=executor, seed=seed, run_id=run_id)


def test_grpo_learns_the_toy_reward(rl_sets, tmp_path):
    """Mean reward of the last iteration is at least twice the first one's (seeded)."""
    out = _run("grpo", [*rl_sets, "train.num_episodes=2", "train.max_iterations=10", "train.max_epochs=2"],
               tmp_path)
    rewards = out["reward_mean"]
    assert len(rewards) == 10
    assert rewards[-1] >= 2 * rewards[0] > 0, rewards


KL = ["algo.kl.init_coef=0.01"]


@pytest.mark.parametrize("name,executor,extra", [
    ("ppo", "ray", ["train.colocate_actor_ref=true", "train.colocate_critic_reward=true",
                    *KL, "critic.save_value_network=true", "train.dynamic_batch_enable=true",
                    "train.max_tokens_per_gpu=160", "rollout.max_tokens_per_gpu=120"]),
    ("reinforce_pp", "inline", ["ref.offload=true", "reward.offload=true", *KL,
                                "algo.kl.use_loss=true", "train.loss_normalizer=micro_batch",
                                "reward.stop_properly_penalty_coef=-0.5"]),
    ("rloo", "inline", ["algo.ptx.ptx_coef=0.1", "algo.ptx.pretrain_data=alignflow:gsm8k-sft",
                        "algo.ptx.pretrain_key=output", "algo.ptx.max_len=32",
                        "actor.policy_loss_type=gspo"]),
])
def test_algorithms_commit_all_tables(name, executor, extra, rl_sets, tmp_path, request):
    """Every step's table; the reference step runs only when a KL term uses it (not rloo).
    On the way: ppo with token-budget micro-batches and its critic exported, REINFORCE++
    with per-micro-batch means and the stop-properly penalty, RLOO with GSPO."""
    with_ref = any(s.startswith("algo.kl.") for s in extra)
    if executor == "ray":
        request.getfixturevalue("ray_local")
    out = _run(name, [*rl_sets, "train.max_iterations=2", *extra], tmp_path, executor=executor,
               run_id=f"{name}-test")
    assert out["iterations"] == 2
    cat = Catalog(str(tmp_path))
    rows = cat.sql("""
        SELECT iteration, count(*) AS n, count(reward) AS scored,
               count(ref_logprobs) AS referenced, count(advantages) AS advantaged,
               count(values) AS valued, min(policy_version) AS v0, max(policy_version) AS v1
        FROM rollouts WHERE run_id = ? GROUP BY iteration ORDER BY iteration""",
                   [f"{name}-test"]).to_pylist()
    assert [r["iteration"] for r in rows] == [0, 1]
    for r in rows:
        assert r["n"] == r["scored"] == r["advantaged"] == 32
        assert r["referenced"] == (32 if with_ref else 0)
        assert r["valued"] == (32 if name == "ppo" else 0)
        assert r["v0"] == r["v1"] == r["iteration"]  # iteration i sampled by policy version i
    keys = {r["task_key"] for r in cat.sql("SELECT task_key FROM tasks WHERE run_id = ?",
                                           [f"{name}-test"]).to_pylist()}
    expected = {"prompts", "iter-0001/generate", "iter-0001/score", "iter-0001/learn",
                "iter-0001/sync", "export"}
    assert ("iter-0001/reference" in keys) == with_ref
    if name == "ppo":
        expected |= {"iter-0001/values", "iter-0001/learn_critic"}
    assert expected <= keys
    metrics = cat.sql("SELECT DISTINCT key FROM metrics WHERE run_id = ?",
                      [f"{name}-test"]).column("key").to_pylist()
    assert {"train/policy_loss", "train/clip_frac", "rollout/reward_mean"} <= set(metrics)
    assert ("train/kl" in metrics) == with_ref
    assert (tmp_path / "runs" / f"{name}-test" / "final" / "actor" / "model.safetensors").exists()
    if name == "ppo":
        _critic_exported(out, tmp_path / "runs" / f"{name}-test")
    ckpts = cat.sql("SELECT kind, count(*) AS n, min(bytes) AS b FROM checkpoints "
                    "WHERE run_id = ? GROUP BY kind ORDER BY kind", [f"{name}-test"]).to_pylist()
    assert [(c["kind"], c["n"]) for c in ckpts] == \
        ([("actor", 2), ("critic", 2)] if name == "ppo" else [("actor", 2)])
    assert all(c["b"] > 0 for c in ckpts)


def _critic_exported(out: dict, run_dir) -> None:
    """--save_value_network: the trained critic as an HF sequence classifier."""
    from transformers import AutoModelForSequenceClassification

    assert out["critic"] == f"runs/{run_dir.name}/final/critic"
    model = AutoModelForSequenceClassification.from_pretrained(run_dir / "final" / "critic")
    assert model.num_labels == 1


def test_tensorboard_export_matches_the_metrics_table(rl_sets, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from alignflow.catalog.tensorboard import export_tensorboard

    _run("grpo", [*rl_sets, "train.max_iterations=2", *KL], tmp_path / "store", run_id="tb")
    cat = Catalog(str(tmp_path / "store"))
    points = export_tensorboard(cat, "tb", tmp_path / "tb")
    events = EventAccumulator(str(tmp_path / "tb" / "tb"))
    events.Reload()
    kl = events.Scalars("train/kl")
    expected = cat.sql("SELECT step, value FROM metrics WHERE run_id = 'tb' AND key = "
                       "'train/kl' ORDER BY step").to_pylist()
    assert [e.step for e in kl] == [r["step"] for r in expected] == [0, 1]
    assert [e.value for e in kl] == pytest.approx([r["value"] for r in expected], abs=1e-6)
    assert [e.step for e in events.Scalars("rollout/reward_mean")] == [0, 1]
    assert points == cat.sql("SELECT count(*) AS n FROM metrics WHERE run_id = 'tb'"
                             ).to_pylist()[0]["n"]  # one series per name: none twice


def test_ppo_without_gae_loads_no_critic(rl_sets, tmp_path):
    """OpenRLHF's train_ppo_ray with another --advantage_estimator creates no critic: nor does
    `ppo` — no critic host, no values or learn_critic task, no critic checkpoint."""
    out = _run("ppo", [*rl_sets, "train.max_iterations=1",
                       "algo.advantage.estimator=reinforce_baseline"], tmp_path, run_id="p")
    assert out["iterations"] == 1
    cat = Catalog(str(tmp_path))
    keys = {r["task_key"] for r in cat.sql("SELECT task_key FROM tasks WHERE run_id = 'p'"
                                           ).to_pylist()}
    assert {"iter-0000/generate", "iter-0000/score", "iter-0000/learn"} <= keys
    assert not {k for k in keys if k.endswith(("/values", "/learn_critic"))}, keys
    valued = cat.sql("SELECT count(values) AS n, count(advantages) AS a FROM rollouts "
                     "WHERE run_id = 'p'").to_pylist()[0]
    assert valued == {"n": 0, "a": 32}
    kinds = cat.sql("SELECT DISTINCT kind FROM checkpoints WHERE run_id = 'p'").column("kind")
    assert kinds.to_pylist() == ["actor"]
