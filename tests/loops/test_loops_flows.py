"""The durable loops end to end on the tiny model: rejection sampling and iterative DPO
raise the toy rule reward's mean from round 0 to round 2, and every round's generations,
scores, selections and pairs are in the store with their round."""

from __future__ import annotations

import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow

pytestmark = pytest.mark.slow


def _run(name: str, sets: list[str], store, run_id: str):
    flow, cfg_cls = load_flow(name)
    return api.run(flow, load_config(cfg_cls, sets=sets), store=str(store), executor="inline",
                   seed=1, run_id=run_id)


def _round_rewards(cat: Catalog, run_id: str) -> list[tuple[int, int, float]]:
    rows = cat.sql("SELECT round, count(*) AS n, avg(reward) AS r FROM rollouts "
                   "WHERE run_id = ? GROUP BY round ORDER BY round", [run_id]).to_pylist()
    return [(r["round"], r["n"], r["r"]) for r in rows]


def test_rejection_sampling_raises_the_reward(loop_sets, tmp_path):
    out = _run("rejection_sampling", loop_sets, tmp_path, "rs")
    cat = Catalog(str(tmp_path))
    rounds = _round_rewards(cat, "rs")
    assert [(r, n) for r, n, _ in rounds] == [(0, 128), (1, 128), (2, 128)]
    assert [pytest.approx(m, abs=1e-6) for *_, m in rounds] == out["reward_mean"]
    assert rounds[2][2] >= 2 * rounds[0][2] > 0, rounds
    assert out["selected"] == [16, 16]
    # the kept sample is each prompt's best: its reward is the prompt's max
    bad = cat.sql("""
        SELECT s.round, s.prompt_id FROM rollout_selection s JOIN rollouts g
          USING (run_id, iteration, prompt_id)
        WHERE s.run_id = 'rs' GROUP BY s.round, s.prompt_id, s.reward
        HAVING s.reward < max(g.reward)""").num_rows
    assert bad == 0
    # every kept sample was trained on max_epochs (4) times, at steps of its round
    seen = cat.sql("""SELECT count(*) AS n, count(DISTINCT sample_id) AS k, min(step) AS s0,
                      max(step) AS s1 FROM sft_samples WHERE run_id = 'rs'""").to_pylist()[0]
    assert seen == {"n": 128, "k": 32, "s0": 1, "s1": 32}  # 2 rounds x 16 samples / 4 x 4 epochs
    keys = set(cat.sql("SELECT task_key FROM tasks WHERE run_id = 'rs'").column(0).to_pylist())
    assert {"round-0000/train-0000", "round-0001/train-0003", "round-0002/score"} <= keys
    assert "round-0001/train-0004" not in keys  # 16 steps per round / save_steps 4


def test_iterative_dpo_raises_the_reward(loop_sets, tmp_path):
    out = _run("iterative_dpo", loop_sets, tmp_path, "idpo")
    cat = Catalog(str(tmp_path))
    rounds = _round_rewards(cat, "idpo")
    assert [r for r, *_ in rounds] == [0, 1, 2]
    assert rounds[2][2] >= 2 * rounds[0][2] > 0, rounds
    pairs = cat.sql("""SELECT round, count(*) AS n, min(chosen_score - rejected_score) AS gap
                       FROM preferences WHERE run_id = 'idpo' AND step IS NULL
                       GROUP BY round ORDER BY round""").to_pylist()
    assert [p["round"] for p in pairs] == [0, 1] and out["pairs"] == [p["n"] for p in pairs]
    assert all(p["gap"] > 0 for p in pairs)
    # chosen = the prompt's best reward, rejected = its worst
    check = cat.sql("""
        WITH g AS (SELECT round, prompt_id, max(reward) AS hi, min(reward) AS lo FROM rollouts
                   WHERE run_id = 'idpo' GROUP BY ALL)
        SELECT count(*) FILTER (WHERE (s.role = 'chosen' AND s.reward <> g.hi)
                                   OR (s.role = 'rejected' AND s.reward <> g.lo)) AS wrong,
               count(*) AS n
        FROM rollout_selection s JOIN g USING (round, prompt_id) WHERE s.run_id = 'idpo'
        """).to_pylist()[0]
    assert check == {"wrong": 0, "n": 2 * sum(out["pairs"])}
    trained = cat.sql("""SELECT count(*) AS n, count(loss) AS l FROM preferences
                         WHERE run_id = 'idpo' AND step IS NOT NULL""").to_pylist()[0]
    assert trained == {"n": 4 * sum(out["pairs"]), "l": 4 * sum(out["pairs"])}
    acc = cat.sql("""SELECT avg(value) AS a FROM metrics WHERE run_id = 'idpo'
                     AND key = 'train/accuracy' AND task_key LIKE 'round-0000/train-0003'
                     """).to_pylist()[0]["a"]
    assert acc >= 0.75  # the last chunk of round 0 separates its pairs


@pytest.mark.parametrize("name", ["rejection_sampling", "iterative_dpo"])
def test_loops_on_ray_equal_inline(name, loop_sets, tmp_path, ray_local):
    """On Ray the host is a separate process that imports only what its tasks need (its
    table schemas included); the run must match the inline one exactly."""
    flow, cfg_cls = load_flow(name)
    sets = [*loop_sets, "rounds=1"]
    outs = [api.run(flow, load_config(cfg_cls, sets=sets), store=str(tmp_path / ex),
                    executor=ex, seed=1, run_id="r") for ex in ("inline", "ray")]
    assert outs[0]["reward_mean"] == outs[1]["reward_mean"]
