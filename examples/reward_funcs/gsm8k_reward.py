"""Example reward function file in OpenRLHF's signature, for GSM8K-style math prompts.

Use it as a reward source by path: the key `reward.remote_url` holds reward files and
servers (OpenRLHF's `--remote_rm_url` / `--reward.remote_url`; `reward` itself is a section
of keys, so there is no `--reward FILE`):

    alignflow run grpo --set reward.remote_url=examples/reward_funcs/gsm8k_reward.py

`queries` are prompt + response, `prompts` the prompts, `labels` the reference answers
(a number, or a full GSM8K solution ending in `#### N`).
Returns `rewards` (used for advantages), `scores` (0/1 correctness, used for dynamic
filtering) and `extra_logs` (logged per sample).
"""

import torch

from alignflow.tasks.rewards.answers import has_format, is_correct

FORMAT_WEIGHT = 0.1  # a small bonus for ending with "#### N"


def reward_func(queries, prompts, labels, **kwargs):
    pairs = zip(queries, prompts, strict=True)
    responses = [q[len(p):] if q.startswith(p) else q for q, p in pairs]
    answers = zip(responses, labels, strict=True)
    correct = torch.tensor([float(is_correct(r, lab)) for r, lab in answers])
    formatted = torch.tensor([float(has_format(r)) for r in responses])
    lengths = torch.tensor([float(len(r)) for r in responses])
    return {
        "rewards": correct + FORMAT_WEIGHT * formatted,
        "scores": correct,
        "extra_logs": {"formatted": formatted, "response_chars": lengths},
    }
