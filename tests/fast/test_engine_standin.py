"""The HF engine standing in for vLLM on a simulated cluster without vLLM
(`tasks/engines/standin.py`): built only on a simulated node, it answers vLLM's calls —
prompt shards at an offset sample what one engine samples for the whole batch, weights
arrive in packed buckets (staged, then committed) and land exactly."""

from __future__ import annotations

import pytest
import torch

from alignflow.errors import ConfigError
from alignflow.tasks.engines import standin
from alignflow.tasks.engines.base import SamplingParams
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.engines.vllm.config import VLLMSection
from alignflow.tasks.modeling.loading import load_causal_lm, load_tokenizer
from alignflow.tasks.simulate import node

PROMPTS = [[5, 6, 7], [8, 9], [10, 11, 12, 13], [14]]
PARAMS = SamplingParams(max_new_tokens=5, n=2, seed=11)


@pytest.fixture
def config():
    return VLLMSection(max_num_seqs=4).engine_config(dtype="fp32", on_gpu=True,
                                                     colocated=False)


def test_it_stands_in_only_on_a_simulated_node(tiny_model_dir, config, monkeypatch):
    monkeypatch.delenv(node.ENV_NODE, raising=False)
    monkeypatch.setattr(standin.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match="vLLM is not installed"):
        standin.build_engine(str(tiny_model_dir), config, policy_version=0)


def test_shards_sample_what_one_engine_samples(tiny_model_dir, config, monkeypatch):
    monkeypatch.setenv(node.ENV_NODE, "0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2")
    monkeypatch.setattr(standin.importlib.util, "find_spec", lambda name: None)
    engine = standin.build_engine(str(tiny_model_dir), config, policy_version=0)
    assert isinstance(engine, standin.HFStandIn)
    whole = HFEngine(load_causal_lm(str(tiny_model_dir)), load_tokenizer(str(tiny_model_dir)),
                     micro_rollout_batch_size=4).generate(PROMPTS, PARAMS)
    shards = engine.generate(PROMPTS[:2], PARAMS) + \
        engine.generate(PROMPTS[2:], PARAMS, prompt_offset=2)
    assert shards == whole


def test_weights_come_in_buckets_and_land_exactly(tiny_model_dir, config, monkeypatch):
    monkeypatch.setenv(node.ENV_NODE, "0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5")
    engine = standin.HFStandIn(str(tiny_model_dir), config, policy_version=0)
    new = {k: v + 0.5 for k, v in engine.hf.model.state_dict().items()}
    engine.update_weights(new.items(), version=3)
    assert engine.policy_version == 3
    for name, tensor in engine.hf.model.state_dict().items():
        assert torch.equal(tensor, new[name]), name
    assert engine.sleep() is False and engine.wake() is False
