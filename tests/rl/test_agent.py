"""Multi-turn agent RL on the tiny model with the arithmetic environment of
`examples/agents/arithmetic.py` (OpenRLHF's agent API): it learns; each turn is a row; only
the policy's tokens carry loss; an environment that raises fails the run with one line, and
the fixed run resumes after the last committed batch."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.errors import TaskFailed
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from alignflow.flows.loader import load_flow

pytestmark = pytest.mark.slow
EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "agents"


@pytest.fixture
def agent_sets(rl_sets) -> list[str]:
    return [*[s for s in rl_sets if not s.startswith("reward.")],
            f"data.prompt_dataset={EXAMPLES / 'arithmetic.jsonl'}", "data.input_key=question",
            "data.label_key=label", "data.apply_chat_template=false",
            "rollout.max_new_tokens=4", "agent.max_turns=3"]


def _run(sets, store, run_id, agent=EXAMPLES / "arithmetic.py"):
    flow, cls = load_flow("grpo")
    cfg = load_config(cls, sets=[*sets, f"train.agent_func_path={agent}"])
    return api.run(flow, cfg, store=str(store), executor="inline", seed=1, run_id=run_id)


def test_the_tiny_model_learns_to_answer_and_retry(agent_sets, tmp_path):
    out = _run([*agent_sets, "train.num_episodes=2", "train.max_iterations=12", "train.max_epochs=2"],
               tmp_path, "agent")
    rewards = out["reward_mean"]
    first, last = sum(rewards[:3]) / 3, sum(rewards[-3:]) / 3
    assert last >= 2 * first > 0, rewards
    cat = Catalog(str(tmp_path))
    # "which episodes failed at turn 3" is one query over the turns
    turns = cat.sql("SELECT turn, count(*) AS n, count(*) FILTER (WHERE reward = 1) AS solved "
                    "FROM rollout_turns GROUP BY 1 ORDER BY 1").to_pylist()
    assert [t["turn"] for t in turns] == [0, 1, 2] and sum(t["solved"] for t in turns) > 0
    rows = cat.sql("""
        SELECT r.response_ids, r.action_mask, r.behaviour_logprobs, r.turns, r.reward,
               list(t.feedback ORDER BY t.turn) AS feedback, list(t.action_tokens ORDER BY
               t.turn) AS acted, sum(t.reward) AS summed
        FROM rollouts r JOIN rollout_turns t USING (run_id, iteration, prompt_id, sample_idx)
        WHERE r.iteration = 11 GROUP BY ALL""").to_pylist()
    assert len(rows) == 32
    for r in rows:
        assert len(r["action_mask"]) == len(r["response_ids"]) == len(r["behaviour_logprobs"])
        assert sum(r["action_mask"]) == sum(r["acted"]) and r["turns"] == len(r["feedback"])
        assert r["reward"] == pytest.approx(r["summed"], abs=1e-5)
        feedback = [lp for lp, m in zip(r["behaviour_logprobs"], r["action_mask"],
                                        strict=True) if not m]
        assert feedback and all(lp == 0.0 for lp in feedback)  # environment tokens: no loss
    advantages = cat.sql("SELECT action_mask, advantages FROM rollouts WHERE iteration = 11 "
                         "AND reward > 0").to_pylist()
    for r in advantages:  # the learner gives feedback tokens no advantage
        assert all(a == 0.0 for a, m in zip(r["advantages"], r["action_mask"], strict=True)
                   if not m)


def test_a_raising_environment_fails_the_run_and_the_fix_resumes(agent_sets, tmp_path):
    """The environment breaks after 96 steps (iteration 0 takes at most 32 episodes x 3):
    the run fails in iteration 1 with one line; fixed, it resumes after batch 0."""
    marker = tmp_path / "broken"
    agent = tmp_path / "flaky.py"
    agent.write_text((EXAMPLES / "arithmetic.py").read_text().replace(
        "        self.turn += 1\n",
        "        self.turn += 1\n        STEPS.append(1)\n"
        f"        if len(STEPS) > 96 and __import__('os').path.exists({str(marker)!r}):\n"
        "            raise RuntimeError('the calculator is down')\n").replace(
        "NUMBER = ", "STEPS = []\nNUMBER = "))
    sets, store = [*agent_sets, "train.max_iterations=3"], tmp_path / "store"
    marker.touch()
    with pytest.raises(TaskFailed, match=r"iter-0001/generate.*AgentInstance.step \(turn \d\) "
                                         r"raised RuntimeError: the calculator is down"):
        _run(sets, store, "flaky", agent)
    before = runs.read_manifests(api.open_store(str(store)), "flaky")
    assert "iter-0000/learn" in before and "iter-0001/generate" not in before
    assert runs.read_run(api.open_store(str(store)), "flaky")["status"] == runs.FAILED
    marker.unlink()
    out = api.resume("flaky", store=str(store), executor="inline", trust=[str(tmp_path)])
    assert len(out["reward_mean"]) == 3
    after = runs.read_manifests(api.open_store(str(store)), "flaky")
    assert after["iter-0000/generate"]["seq"] == before["iter-0000/generate"]["seq"]


def test_agent_episodes_run_asynchronously(agent_sets, tmp_path):
    """OpenRLHF's async agent script: episodes one version ahead, IS correction on; its
    eval set answered in episodes too (every 2 iterations: after the second)."""
    out = _run([*agent_sets, "train.max_iterations=3", "train.async_enable=true",
                "algo.advantage.is_correction_enable=true",
                f"eval.dataset={EXAMPLES / 'arithmetic.jsonl'}", "eval.steps=2",
                "eval.n_samples_per_prompt=2"], tmp_path, "async-agent")
    assert len(out["reward_mean"]) == 3
    evals = Catalog(str(tmp_path)).sql(
        "SELECT step, value FROM metrics WHERE key = 'eval/default/pass1'").to_pylist()
    assert [e["step"] for e in evals] == [1] and 0 <= evals[0]["value"] <= 1
    assert out["best"]["iteration"] == 1
    rows = Catalog(str(tmp_path)).sql(
        "SELECT iteration, min(policy_version) AS v, max(staleness) AS s, "
        "count(consumed_at_step) AS c FROM rollouts GROUP BY 1 ORDER BY 1").to_pylist()
    assert [(r["v"], r["s"], r["c"]) for r in rows] == [(0, 0, 32), (0, 1, 32), (1, 1, 32)]
