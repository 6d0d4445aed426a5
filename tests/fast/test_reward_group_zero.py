"""`--reward_num_nodes 0 --reward_num_gpus_per_node 0` beside `--remote_rm_url`, as real
launch scripts write it, is accepted (issue 47, item 6).

The expectation, OpenRLHF (train_ppo_ray.py, v0.9 to 0.11): with a remote reward URL no
reward model group is built (`reward_model = None`), so the reward layout flags are never
read and 0 is a common way to say "no reward GPUs". alignflow scores rules and remote
servers in one process without a GPU either way, so 0 reads as that layout; a reward
model still needs a group (0 refused in one line)."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run

ZERO = ["--reward_num_nodes", "0", "--reward_num_gpus_per_node", "0"]


@pytest.mark.parametrize("source", [["--remote_rm_url", "http://localhost:5000/get_reward"],
                                    []])  # rules: the default rule:gsm8k
def test_zero_reward_group_with_remote_or_rule_rewards(source):
    reward = check_run("grpo", None, [], [*source, *ZERO], check=False).config.reward
    assert (reward.num_nodes, reward.num_gpus_per_node) == (1, 1)


def test_zero_reward_group_with_a_reward_model_is_refused():
    with pytest.raises(ConfigError, match=r"^config key 'reward.num_nodes': expected an "
                       r"integer >= 1 where a reward model is scored .*got 0$"):
        check_run("grpo", None, [], ["--reward_pretrain", "tiny-llama-rm", *ZERO[:2]],
                  check=False)
