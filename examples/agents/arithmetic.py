"""A small multi-turn arithmetic environment, written against OpenRLHF's agent API.

The prompt asks for a sum ("3+4="); the label holds the answer. Each turn the environment
reads the number the policy wrote: right earns 1 and ends the episode; a wrong number
earns 0.1 (it answered in the asked form) and "wrong, try again"; anything else earns 0
and a reminder to answer with a number. The episode reward is the sum over its turns, so
a model that corrects itself after a "wrong" still earns the 1.

Train with it (the same file runs under OpenRLHF's `--agent_func_path`; an episode's turns
need a token budget each):
    alignflow run reinforce_pp_baseline --agent_func_path examples/agents/arithmetic.py \
        --prompt_data examples/agents/arithmetic.jsonl --input_key question --generate_max_len 64
"""

import re

import torch
from openrlhf.utils.agent import AgentInstanceBase, MultiTurnAgentExecutor

NUMBER = re.compile(r"-?\d+")


class AgentInstance(AgentInstanceBase):
    def __init__(self, *args, **kwargs):
        self.turn = 0

    async def reset(self, states: dict, **kwargs):
        return {"observation": states["observation"]}

    async def step(self, states: dict, **kwargs):
        self.turn += 1
        action = states["action_text"].strip()
        found = NUMBER.search(action)
        if found and found.group() == str(states["label"]).strip():
            reward, feedback, done = 1.0, " correct\n", True
        elif found:
            reward, feedback, done = 0.1, " wrong, try again\n", False
        else:
            reward, feedback, done = 0.0, " answer with a number\n", False
        return {"rewards": torch.tensor([reward]), "scores": torch.tensor([reward]),
                "environment_feedback": feedback, "done": done,
                "sampling_params": states.get("sampling_params"),
                "extra_logs": {"turn": torch.tensor([float(self.turn)])}}


class AgentExecutor(MultiTurnAgentExecutor):
    def __init__(self):
        super().__init__(AgentInstance)
