"""A reward function of your own, in OpenRLHF's signature: 1.0 when the response's last
number equals the prompt's label, else 0.0. No alignflow import: any file defining
`reward_func` works (README, "Your own data and reward function"):

    alignflow run grpo --data.prompt_dataset examples/reward_funcs/sums.jsonl --data.input_key question --data.label_key answer --reward.remote_url examples/reward_funcs/exact_match.py --rollout.batch_size 4 --rollout.n_samples_per_prompt 4 --rollout.max_new_tokens 32 --data.max_len 96 --train.batch_size 8 --train.max_iterations 2

Called once per batch of samples: `queries[i]` is prompt + response as text, `prompts[i]`
the prompt, `labels[i]` the row's `--label_key` value (None without one). Returns a
tensor of one reward per sample, or a dict with `rewards` (for the advantages), `scores`
(for dynamic filtering; default: the rewards) and `extra_logs` (per-sample metrics).
"""

import re

import torch

NUMBER = re.compile(r"-?\d+(?:\.\d+)?")


def reward_func(queries, prompts, labels, **kwargs):
    rewards = []
    for query, prompt, label in zip(queries, prompts, labels, strict=True):
        response = query[len(prompt):] if query.startswith(prompt) else query
        numbers = NUMBER.findall(response.replace(",", ""))
        rewards.append(float(bool(numbers) and label is not None
                             and float(numbers[-1]) == float(label)))
    rewards = torch.tensor(rewards)
    return {"rewards": rewards, "scores": rewards,
            "extra_logs": {"answered": torch.tensor([float(bool(NUMBER.search(q[len(p):])))
                                                     for q, p in zip(queries, prompts,
                                                                     strict=True)])}}
