"""OpenRLHF's length rules for RL: `data.max_len` is prompt + response; with
`rollout.max_new_tokens` null each prompt gets max_len minus its length; over-long prompts
keep their last tokens."""

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.rl.config import RLConfig
from alignflow.tasks.engines.base import SamplingParams
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.steps.generate import RolloutConfig, budgets, cut_to_budget
from alignflow.tasks.steps.prompts import DataConfig

torch.set_num_threads(1)
NO_EOS = (10**9,)  # never sampled: every response runs to its limit


def test_per_prompt_budgets_and_exact_cuts(tiny_model_dir):
    engine = HFEngine.from_pretrained(str(tiny_model_dir), micro_rollout_batch_size=4)
    prompts = [engine.tokenizer.encode(t) for t in ("a b c d e f", "hi")]
    limits = budgets(prompts, RolloutConfig(max_new_tokens=None), max_len=14)
    assert limits == [14 - len(prompts[0]), 14 - len(prompts[1])]
    params = SamplingParams(max_new_tokens=max(limits), n=2, seed=5, eos_token_ids=NO_EOS)
    cut = [cut_to_budget(s, limits[s.prompt_index]) for s in engine.generate(prompts, params)]
    for i, limit in enumerate(limits):  # the same as generating that prompt under its own limit
        alone = engine.generate(prompts, SamplingParams(max_new_tokens=limit, n=2, seed=5,
                                                        eos_token_ids=NO_EOS))
        mine = [s for s in cut if s.prompt_index == i]
        assert [s.response_ids for s in mine] == [
            s.response_ids for s in alone if s.prompt_index == i]
        assert all(len(s.behaviour_logprobs) == limit for s in mine)
    assert budgets(prompts, RolloutConfig(max_new_tokens=3), None) == [3, 3]
    with pytest.raises(ConfigError, match="needs data.max_len"):
        budgets(prompts, RolloutConfig(max_new_tokens=None), None)


def test_prompt_limit_truncates_as_openrlhf_or_drops_as_alignflow():
    assert DataConfig(max_len=None).prompt_limit(128) == (256, "drop")
    assert DataConfig().prompt_limit(128) == (1920, "truncate")  # OpenRLHF's max_len 2048
    assert DataConfig(truncation_side="right").prompt_limit(128) == (1920, "truncate_right")
    assert DataConfig(max_len=2048).prompt_limit(1024) == (1024, "truncate")
    assert DataConfig(max_len=2048).prompt_limit(None) == (2047, "truncate")


def test_length_keys_are_checked_together():
    load_config(RLConfig, sets=["rollout.max_new_tokens=null", "data.max_len=64"])
    with pytest.raises(ConfigError, match="'data.max_len': expected a total length when "
                                          "rollout.max_new_tokens is null"):
        load_config(RLConfig, sets=["rollout.max_new_tokens=null", "data.max_len=null"])
    with pytest.raises(ConfigError, match="'data.max_len': expected more than "
                                          "rollout.max_new_tokens=128, got 100"):
        load_config(RLConfig, sets=["data.max_len=100", "rollout.max_new_tokens=128"])
