"""OpenRLHF's agent API (`openrlhf.utils.agent`), written for alignflow: an agent file that
imports `AgentInstanceBase` and `MultiTurnAgentExecutor` from there gets these classes.

An episode, token in and token out: the environment's `reset` gives the first observation
(text, tokenised once); then each turn the policy generates from the token list as it
stands, the environment's `step` judges the action text and answers with feedback (text,
tokenised alone and appended), a reward and `done`. Earlier tokens are never re-tokenised,
so the ids the learner trains on are the ids that were sampled. Only the policy's tokens
(the action ranges) carry loss; rewards of all turns are summed (OpenRLHF's rule).
"""

from __future__ import annotations

import copy
import inspect
from abc import ABC, abstractmethod
from typing import Any

from alignflow.tasks.agents.guard import AgentError, call_env, step_result


class AgentInstanceBase(ABC):
    """One environment instance per episode: `reset(states)`, then `step(states)` per turn."""

    @abstractmethod
    def __init__(self, *args, **kwargs) -> None: ...

    async def reset(self, states: dict, **kwargs) -> dict:
        return states

    @abstractmethod
    async def step(self, states: dict, **kwargs) -> dict: ...


class AgentExecutorBase(ABC):
    """Runs one episode; returns observation_tokens, action_ranges, reward, ... (see runner)."""

    @abstractmethod
    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer,
                      llm_engine, images=None) -> dict: ...


class MultiTurnAgentExecutor(AgentExecutorBase):
    """The usual executor: `class AgentExecutor(MultiTurnAgentExecutor)` passing its
    instance class. alignflow sets `max_turns` and `step_timeout` from the `agent` section."""

    max_turns: int = 4
    step_timeout: float = 60.0

    def __init__(self, agent_instance_cls: type) -> None:
        if not (isinstance(agent_instance_cls, type)
                and issubclass(agent_instance_cls, AgentInstanceBase)):
            raise AgentError(f"MultiTurnAgentExecutor({agent_instance_cls!r}): expected a "
                             "subclass of AgentInstanceBase")
        if inspect.iscoroutinefunction(agent_instance_cls.__init__):
            raise AgentError(f"{agent_instance_cls.__name__}.__init__ is `async def` (as in "
                             "OpenRLHF 0.9.10's example); Python cannot run that: use `def`")
        self.agent_instance_cls = agent_instance_cls

    async def execute(self, prompt, label, sampling_params, max_length: int, hf_tokenizer,
                      llm_engine, images=None) -> dict:
        env = self.agent_instance_cls()
        name = self.agent_instance_cls.__name__
        start = await call_env(env.reset({"observation": prompt, "label": label}),
                               timeout=self.step_timeout, what=f"{name}.reset")
        if not isinstance(start, dict) or not isinstance(start.get("observation"), str):
            raise AgentError(f"{name}.reset returned {type(start).__name__}; expected a dict "
                             "with the observation text")
        episode = _Episode(start["observation"], hf_tokenizer, max_length)
        params = copy.deepcopy(sampling_params)
        for turn in range(self.max_turns):
            budget = min(params.max_tokens, max_length - len(episode.tokens))
            if budget <= 0:
                break
            params.max_tokens = budget
            out = (await llm_engine.generate(episode.tokens, copy.deepcopy(params))).outputs[0]
            states = {"observation_text": episode.text, "action_text": out.text,
                      "label": label, "sampling_params": params}
            result = step_result(await call_env(env.step(states), timeout=self.step_timeout,
                                                what=f"{name}.step (turn {turn})"),
                                 f"{name}.step (turn {turn})")
            episode.add_turn(out, result)
            params = result.get("sampling_params") or params
            if result["done"]:
                break
        return episode.result(prompt, label)


class _Episode:
    """The token list of an episode as it grows, and what each turn added."""

    def __init__(self, observation: str, tokenizer, max_length: int) -> None:
        self.tokenizer, self.text = tokenizer, observation
        self.tokens = tokenizer(observation, add_special_tokens=False)["input_ids"]
        if len(self.tokens) >= max_length:
            raise AgentError(f"the first observation has {len(self.tokens)} tokens; "
                             f"agent.max_length={max_length} leaves no room to act")
        self.logprobs = [0.0] * len(self.tokens)
        self.ranges: list[tuple[int, int]] = []
        self.turns: list[dict[str, Any]] = []
        self.reward, self.scores, self.logs, self.done = 0.0, None, {}, False

    def add_turn(self, out, result: dict[str, Any]) -> None:
        action = list(out.token_ids)
        feedback = self.tokenizer(result["environment_feedback"],
                                  add_special_tokens=False)["input_ids"]
        self.ranges.append((len(self.tokens), len(self.tokens) + len(action)))
        self.logprobs += [lp[tok].logprob for lp, tok in zip(out.logprobs, action, strict=True)]
        self.logprobs += [0.0] * len(feedback)  # the environment's tokens: no behaviour
        self.tokens = self.tokens + action + feedback
        self.text += out.text + result["environment_feedback"]
        self.reward += result["rewards"]
        self.scores = result.get("scores", self.reward)
        self.logs, self.done = result["extra_logs"], result["done"]
        self.turns.append({"action": out.text, "feedback": result["environment_feedback"],
                           "reward": result["rewards"], "done": result["done"],
                           "action_tokens": len(action), "feedback_tokens": len(feedback)})

    def result(self, prompt, label) -> dict[str, Any]:
        return {"prompt": prompt, "label": label, "reward": self.reward,
                "scores": self.reward if self.scores is None else self.scores,
                "observation_tokens": self.tokens, "action_ranges": self.ranges,
                "rollout_log_probs": self.logprobs, "extra_logs": self.logs,
                "turns": self.turns, "done": self.done}
