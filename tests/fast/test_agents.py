"""Agent episodes with a fake engine: OpenRLHF's file shape loads unchanged, turns and token
layout (token in, token out; loss only on actions), batching across episodes, and one clear
error for an environment that raises, hangs or answers malformed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from alignflow.errors import ConfigError, FlowError
from alignflow.flows.config.refs import Reference
from alignflow.flows.trust import Context, check, local_sayso
from alignflow.tasks.agents.engine import BatchingEngine
from alignflow.tasks.agents.guard import AgentError
from alignflow.tasks.agents.loader import load_agent_executor
from alignflow.tasks.agents.runner import run_episodes
from alignflow.tasks.agents.sampling import AgentSamplingParams
from alignflow.tasks.engines.base import GeneratedSample
from tests.fixtures.code import allow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "agents" / "arithmetic.py"


@pytest.fixture(autouse=True)
def _example_allowed() -> None:
    allow(EXAMPLE)


class CharTokenizer:
    """One token per character (ids = code points); 0 is EOS and decodes to nothing."""

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i)


class ScriptedEngine:
    """Answers the n-th call of each row position with `answers[n]`, then EOS."""

    def __init__(self, answers: list[str]) -> None:
        self.answers, self.calls = answers, []

    def generate(self, prompts, params):
        self.calls.append(len(prompts))
        text = self.answers[min(len(self.calls) - 1, len(self.answers) - 1)]
        ids = [ord(c) for c in text][: params.max_new_tokens - 1] + [0]
        return [GeneratedSample(prompt_index=i, sample_index=0, prompt_ids=list(p),
                                response_ids=ids, behaviour_logprobs=[-0.5] * len(ids),
                                finish_reason="stop", policy_version=0)
                for i, p in enumerate(prompts)]


def _episodes(executor, answers, requests, max_length=64, max_tokens=4):
    engine = ScriptedEngine(answers)
    batcher = BatchingEngine(engine, CharTokenizer(), seed=1, eos_token_ids=(0,),
                             episodes=len(requests))
    eps = run_episodes(executor, requests, batcher, CharTokenizer(),
                       AgentSamplingParams(max_tokens=max_tokens), max_length)
    return eps, engine


def _agent(tmp_path, step_body: str, extra: str = "") -> Path:
    path = tmp_path / "agent.py"
    path.write_text(
        "import time\nfrom openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor\n"
        f"{extra}\n"
        "class AgentInstance(AgentInstanceBase):\n"
        "    def __init__(self, *args, **kwargs):\n        self.turn = 0\n"
        "    async def step(self, states, **kwargs):\n"
        f"{step_body}\n"
        "class AgentExecutor(MultiTurnAgentExecutor):\n"
        "    def __init__(self):\n        super().__init__(AgentInstance)\n")
    allow(path)
    return path


def test_openrlhf_file_runs_unchanged_turn_by_turn():
    executor = load_agent_executor(EXAMPLE, max_turns=3)
    assert "openrlhf" not in sys.modules  # the API shim is gone once the file is imported
    eps, engine = _episodes(executor, ["x", "5", "7"], [("3+4=", "7"), ("2+3=", "5")])
    first, second = eps
    # "3+4=": x (no number, 0) → 5 (wrong, 0.1) → 7 (right, 1.0)
    assert [t["reward"] for t in first.turns] == pytest.approx([0.0, 0.1, 1.0]) and first.done
    assert first.reward == pytest.approx(1.1)
    # "2+3=": x → 5 (right at the second turn) → ends; the engine still batched both
    assert [t["reward"] for t in second.turns] == [0.0, 1.0]
    assert engine.calls == [2, 2, 1]
    # token in, token out: prompt, then action + EOS, then the feedback, tokenised alone
    assert first.prompt_ids == [ord(c) for c in "3+4="]
    feedback = " answer with a number\n"
    assert first.response_ids[:2 + len(feedback)] == [ord("x"), 0] + [ord(c) for c in feedback]
    assert first.action_mask[:2 + len(feedback)] == [1, 1] + [0] * len(feedback)
    assert first.logprobs[:3] == [-0.5, -0.5, 0.0]
    assert sum(first.action_mask) == 6 and len(first.turns) == 3


def test_max_turns_and_length_end_an_episode():
    executor = load_agent_executor(EXAMPLE, max_turns=2)
    eps, _ = _episodes(executor, ["x"], [("1+1=", "2")])
    assert len(eps[0].turns) == 2 and not eps[0].done
    executor = load_agent_executor(EXAMPLE, max_turns=10)
    eps, _ = _episodes(executor, ["x"], [("1+1=", "2")], max_length=40)
    assert len(eps[0].prompt_ids) + len(eps[0].response_ids) <= 40 + 22  # last feedback


@pytest.mark.parametrize("body,match", [
    ("        raise ValueError('env exploded')", r"AgentInstance.step \(turn 0\) raised "
                                                  r"ValueError: env exploded"),
    ("        time.sleep(30)\n        return {}", r"did not return within agent.step_timeout"),
    ("        return {'rewards': 1.0, 'environment_feedback': 'ok'}", r"returned no done"),
    ("        return {'rewards': 'lots', 'environment_feedback': '', 'done': True}",
     r"rewards is 'lots'; expected a finite number"),
    ("        return ['not', 'a', 'dict']", r"returned a list; expected a dict"),
])
def test_environment_faults_are_one_clear_error(tmp_path, body, match):
    executor = load_agent_executor(_agent(tmp_path, body), step_timeout=0.5)
    start = time.time()
    with pytest.raises(AgentError, match=match) as err:
        _episodes(executor, ["7"], [("3+4=", "7"), ("1+1=", "2")])
    assert "episode 0" in str(err.value) and isinstance(err.value, ConfigError)
    assert time.time() - start < 10  # a hanging environment is abandoned, not waited for


def test_a_custom_executor_with_bad_ranges_is_refused(tmp_path):
    path = tmp_path / "custom.py"
    path.write_text(
        "from openrlhf.utils.agent import AgentExecutorBase\n"
        "class AgentExecutor(AgentExecutorBase):\n"
        "    async def execute(self, prompt, label, sampling_params, max_length, hf_tokenizer,"
        " llm_engine, images=None):\n"
        "        out = await llm_engine.generate([1, 2], sampling_params)\n"
        "        ids = [1, 2] + out.outputs[0].token_ids\n"
        "        return {'observation_tokens': ids, 'action_ranges': [(2, 99)], 'reward': 1.0,"
        " 'rollout_log_probs': [0.0] * len(ids)}\n")
    allow(path)
    with pytest.raises(AgentError, match=r"action_ranges \[\(2, 99\)\] are not increasing"):
        _episodes(load_agent_executor(path), ["7"], [("q", "a")])


@pytest.mark.parametrize("source,match", [
    ("x = 1\n", "defines no class AgentExecutor"),
    ("raise RuntimeError('boom')\n", "importing agent file .* failed: RuntimeError: boom"),
    ("from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor\n"
     "class I(AgentInstanceBase):\n    async def __init__(self):\n        pass\n"
     "    async def step(self, s):\n        return s\n"
     "class AgentExecutor(MultiTurnAgentExecutor):\n"
     "    def __init__(self):\n        super().__init__(I)\n", r"__init__ is `async def`"),
])
def test_loading_faults_name_the_file(tmp_path, source, match):
    path = tmp_path / "bad.py"
    path.write_text(source)
    allow(path)
    with pytest.raises(AgentError, match=match):
        load_agent_executor(path)
    with pytest.raises(AgentError, match="not found"):
        load_agent_executor(tmp_path / "missing.py")


def test_a_stored_agent_file_must_be_trusted_on_resume(monkeypatch, tmp_path):
    monkeypatch.delenv("ALIGNFLOW_TRUSTED_DIRS", raising=False)
    monkeypatch.setenv("ALIGNFLOW_TRUST_FILE", str(tmp_path / "none.toml"))
    refs = [Reference("train.agent_func_path", "code", str(EXAMPLE))]
    with pytest.raises(FlowError, match="names code file .*arithmetic.py"):
        check(refs, local_sayso(), Context("r1", {}))
    allowed = check(refs, local_sayso([str(EXAMPLE.parent)]), Context("r1", {}))
    assert list(allowed.files) == [str(EXAMPLE)]
