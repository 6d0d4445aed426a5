"""An RL run with its reward sources emptied and nothing else giving a reward is refused
at start in one line (issue 47, item 17: it trained on zero rewards and exited 0).

The expectation, OpenRLHF 0.11's train_ppo_ray.py: without `--reward.remote_url` it builds
a reward model group and loads `--reward.model_name_or_path` into it, so a run with neither
fails before training; an agent (`--train.agent_func_path`) brings its own rewards."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run

EMPTY = ["reward.sources=[]"]


@pytest.mark.parametrize("flow", ["grpo", "ppo"])
def test_no_reward_source_is_refused_in_one_line(flow):
    with pytest.raises(ConfigError) as info:
        check_run(flow, None, EMPTY, [], check=False)
    assert str(info.value).startswith("reward.sources = [] (--set reward.sources) leaves the "
                                      "run no reward: no reward model (--reward_pretrain)")
    assert "\n" not in str(info.value)


def test_a_model_a_url_or_the_default_still_start():
    for flags in (["--remote_rm_url", "http://localhost:5000/get_reward"],
                  ["--reward_pretrain", "tiny-llama-rm"]):
        assert check_run("grpo", None, EMPTY, flags, check=False).config.reward.specs
    assert check_run("grpo", None, [], [], check=False).config.reward.specs == ("rule:gsm8k",)
