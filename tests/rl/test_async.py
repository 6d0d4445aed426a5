"""Asynchronous GRPO on the tiny model: it learns at staleness 1 and 2, every batch is
consumed exactly once at the staleness the schedule says, the inline and Ray executors
agree bitwise, partial rollouts continue responses across a weight update, a recorded
partial-rollout schedule replays bitwise, and stale batches are regenerated or dropped."""

from __future__ import annotations

import pytest
from safetensors.torch import load_file

from alignflow.catalog.catalog import Catalog
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow

pytestmark = pytest.mark.slow
PARTIAL = ["async.max_staleness=1", "train.partial_rollout_enable=true", "async.segment_tokens=2"]


def _run(sets, store, run_id, executor="inline"):
    flow, cls = load_flow("grpo")
    return api.run(flow, load_config(cls, sets=sets), store=str(store), executor=executor,
                   seed=1, run_id=run_id)


def _weights(store, run_id):
    return load_file(store / "runs" / run_id / "final" / "actor" / "model.safetensors")


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)


def consumption(cat: Catalog, run_id: str) -> list[dict]:
    """Per generated batch: the step that consumed it, its staleness, rows, consumptions."""
    return cat.sql("""
        SELECT iteration, task_key, min(consumed_at_step) AS step, max(consumed_at_step) AS
               step_max, min(staleness) AS stale, max(staleness) AS stale_max, count(*) AS n,
               count(consumed_at_step) AS consumed
        FROM rollouts WHERE run_id = ? GROUP BY ALL ORDER BY iteration, task_key""",
                   [run_id]).to_pylist()


@pytest.mark.parametrize("staleness", [1, 2])
def test_async_grpo_learns_and_consumes_each_batch_once(staleness, rl_sets, tmp_path):
    """With the truncated IS correction (the PPO ratio against the learner's own weights)."""
    out = _run([*rl_sets, "train.num_episodes=2", "train.max_iterations=10", "train.max_epochs=2",
                f"async.max_staleness={staleness}", "algo.advantage.is_correction_enable=true"],
               tmp_path, "async")
    rewards = out["reward_mean"]
    assert rewards[-1] >= 2 * rewards[0] > 0, rewards
    batches = consumption(Catalog(str(tmp_path)), "async")
    assert [b["iteration"] for b in batches] == list(range(10))
    for b in batches:  # batch k: learned at step k, sampled by the policy of step k − s
        assert b["step"] == b["step_max"] == b["iteration"]
        assert b["stale"] == b["stale_max"] == min(b["iteration"], staleness)
        assert b["n"] == b["consumed"] == 32
    duplicates = Catalog(str(tmp_path)).sql(
        "SELECT iteration, prompt_id, sample_idx FROM rollout_consumption GROUP BY ALL "
        "HAVING count(*) > 1").num_rows
    assert duplicates == 0


def test_inline_and_ray_agree_and_a_partial_schedule_replays(rl_sets, tmp_path, ray_local):
    """Scheduled batches: the same weights on both executors. Partial rollouts on Ray
    (versions decided by timing): a replay of the recorded schedule gives the same weights."""
    sets = [*rl_sets, "train.max_iterations=3"]
    _run([*sets, "async.max_staleness=1"], tmp_path, "inline")
    _run([*sets, "async.max_staleness=1"], tmp_path, "ray", executor="ray")
    assert _same(_weights(tmp_path, "inline"), _weights(tmp_path, "ray"))
    _run([*sets, *PARTIAL], tmp_path, "partial-ray", executor="ray")
    _run([*sets, *PARTIAL, "async.replay_schedule=partial-ray"], tmp_path, "replayed")
    assert _same(_weights(tmp_path, "partial-ray"), _weights(tmp_path, "replayed"))
    versions = Catalog(str(tmp_path)).sql(
        "SELECT run_id, list(output->>'$.fields.policy_version' ORDER BY task_key) AS v "
        "FROM tasks WHERE task_key LIKE 'iter-%/generate-s%' GROUP BY 1").to_pylist()
    assert len({tuple(r["v"]) for r in versions}) == 1 and len(versions) == 2


def test_partial_rollouts_continue_responses_across_a_weight_update(rl_sets, tmp_path):
    """Inline: batch k's first segment is sampled by policy k − 1; the update of step k − 1
    lands before its second segment, and the unfinished responses continue with it."""
    _run([*rl_sets, "train.max_iterations=3", *PARTIAL], tmp_path, "partial")
    cat = Catalog(str(tmp_path))
    rows = cat.sql("""
        SELECT iteration, version_spans AS spans, response_len, policy_version, staleness
        FROM rollouts WHERE run_id = 'partial' ORDER BY iteration""").to_pylist()
    assert len(rows) == 96
    for r in rows:
        versions = [s["version"] for s in r["spans"]]
        assert versions == sorted(versions) and r["policy_version"] == versions[0]
        assert r["spans"][0]["start"] == 0
        if r["iteration"] and r["response_len"] > 2:  # continued past the first segment
            assert versions[0] == r["iteration"] - 1 and versions[-1] == r["iteration"]
            assert r["spans"][1]["start"] == 2 and r["staleness"] == 1
    segments = cat.sql("SELECT iteration, segment, sum(len(response_ids)) AS tokens "
                       "FROM rollout_segments WHERE run_id = 'partial' GROUP BY ALL "
                       "ORDER BY ALL").to_pylist()
    total = {it: sum(s["tokens"] for s in segments if s["iteration"] == it) for it in range(3)}
    lengths = cat.sql("SELECT iteration, sum(response_len) AS n FROM rollouts WHERE run_id = "
                      "'partial' GROUP BY 1 ORDER BY 1").to_pylist()
    assert [total[r["iteration"]] for r in lengths] == [r["n"] for r in lengths]


@pytest.mark.parametrize("action", ["regenerate", "drop"])
def test_batches_beyond_the_bound_are_regenerated_or_dropped(action, rl_sets, tmp_path):
    """Replaying a staleness-2 schedule under a bound of 1: batches 2 and 3 come out two
    versions old; they are regenerated with the current weights, or dropped — and counted."""
    sets = [*rl_sets, "train.max_iterations=4", "train.partial_rollout_enable=true",
            "async.segment_tokens=4"]
    _run([*sets, "async.max_staleness=2"], tmp_path, "loose")
    out = _run([*sets, "async.max_staleness=1", f"async.on_stale={action}",
                "async.replay_schedule=loose"], tmp_path, "tight")
    cat = Catalog(str(tmp_path))
    counted = cat.sql("SELECT step, replace(key, 'rollout/', '') AS key FROM metrics WHERE "
                      "run_id = 'tight' AND key IN ('rollout/regenerated_batches', "
                      "'rollout/dropped_batches') ORDER BY step").to_pylist()
    batches = {(b["iteration"], b["task_key"].rsplit("/", 1)[1].split("-")[0]): b
               for b in consumption(cat, "tight")}  # (iteration, generate | regenerate)
    assert batches[(2, "generate")]["consumed"] == 0
    if action == "regenerate":  # batches 2 and 3 are two versions old: both regenerated
        assert [(c["step"], c["key"]) for c in counted] == [(2, "regenerated_batches"),
                                                            (3, "regenerated_batches")]
        for it in (2, 3):
            fresh = batches[(it, "regenerate")]
            assert (fresh["stale"], fresh["step"], fresh["consumed"]) == (0, it, 32)
        assert len(out["reward_mean"]) == 4
    else:  # batch 2 dropped; without step 2's update batch 3 is one version old: learned
        assert [(c["step"], c["key"]) for c in counted] == [(2, "dropped_batches")]
        assert len(out["reward_mean"]) == 3
        assert batches[(3, "generate")]["stale"] == 1
