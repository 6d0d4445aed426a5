"""HF engine on the tiny model: layout, n samples, eos/stop, logprobs, seeded determinism."""

import pytest
import torch

from alignflow.artifacts.tensors import pad_left as left_pad
from alignflow.errors import ConfigError
from alignflow.tasks.engines.base import GenerationEngine, SamplingParams
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.modeling.logprobs import sequence_logprobs
from tests.tolerance import network_bound

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def lm_dir(tiny_model_dir):
    return tiny_model_dir


@pytest.fixture(scope="module")
def engine(lm_dir):
    return HFEngine.from_pretrained(str(lm_dir), micro_rollout_batch_size=4)


@pytest.fixture(scope="module")
def prompts(engine):
    texts = ["Question: What is 12 + 7?", "Hello", "The capital of France is the city of"]
    return [engine.tokenizer.encode(t) for t in texts]


NO_EOS = (10**9,)  # an id the model never samples: every response runs to max_new_tokens


def _ids(samples):
    return [s.response_ids for s in samples]


def test_engine_satisfies_protocol(engine):
    assert isinstance(engine, GenerationEngine)


def test_n_samples_per_prompt_in_order(engine, prompts):
    out = engine.generate(prompts, SamplingParams(max_new_tokens=5, n=3, seed=0, eos_token_ids=NO_EOS))
    assert [(s.prompt_index, s.sample_index) for s in out] == [(p, k) for p in range(3) for k in range(3)]
    assert all(s.prompt_ids == prompts[s.prompt_index] for s in out)
    assert all(len(s.response_ids) == 5 and s.finish_reason == "length" for s in out)
    assert len({tuple(s.response_ids) for s in out}) == 9  # near-uniform tiny model: all differ


def test_same_seed_same_samples_bitwise(engine, prompts):
    params = SamplingParams(max_new_tokens=8, n=2, seed=42, temperature=0.9, top_p=0.95, top_k=50)
    a, b = engine.generate(prompts, params), engine.generate(prompts, params)
    assert _ids(a) == _ids(b)
    assert [s.behaviour_logprobs for s in a] == [s.behaviour_logprobs for s in b]
    c = engine.generate(prompts, SamplingParams(max_new_tokens=8, n=2, seed=43, temperature=0.9))
    assert _ids(a) != _ids(c)


def test_samples_do_not_depend_on_batch_composition(lm_dir, engine, prompts):
    params = SamplingParams(max_new_tokens=8, n=2, seed=7, eos_token_ids=NO_EOS)
    one_by_one = HFEngine.from_pretrained(str(lm_dir), micro_rollout_batch_size=1)
    assert _ids(one_by_one.generate(prompts, params)) == _ids(engine.generate(prompts, params))


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_behaviour_logprobs_equal_recomputed(engine, prompts, temperature):
    """Left-padded prompt + right-padded response through `sequence_logprobs`, same T."""
    params = SamplingParams(max_new_tokens=6, n=2, seed=1, temperature=temperature)
    out = engine.generate(prompts, params)
    p_ids, p_mask = left_pad([s.prompt_ids for s in out], engine.pad_token_id)
    width = max(len(s.response_ids) for s in out)
    r_ids = torch.full((len(out), width), engine.pad_token_id)
    r_mask = torch.zeros_like(r_ids)
    for i, s in enumerate(out):
        r_ids[i, : len(s.response_ids)] = torch.tensor(s.response_ids)
        r_mask[i, : len(s.response_ids)] = 1
    with torch.no_grad():
        lp = sequence_logprobs(engine.model, torch.cat([p_ids, r_ids], 1),
                               torch.cat([p_mask, r_mask], 1), width, temperature=temperature)
    # generate's cached incremental steps vs one full forward: rounding only (tolerance.py)
    tol = network_bound(engine.model.config, lp.abs().max() / temperature)
    for i, s in enumerate(out):
        torch.testing.assert_close(lp[i, : len(s.response_ids)],
                                   torch.tensor(s.behaviour_logprobs), atol=tol, rtol=0)


def test_greedy_matches_hf_generate(engine, prompts):
    out = engine.generate(prompts[:1], SamplingParams(max_new_tokens=6, temperature=0.0, eos_token_ids=NO_EOS))
    ref = engine.model.generate(torch.tensor([prompts[0]]), do_sample=False, max_new_tokens=6,
                                eos_token_id=None, pad_token_id=engine.pad_token_id)
    assert out[0].response_ids == ref[0, len(prompts[0]):].tolist()


def test_eos_stops_and_is_kept(engine, prompts):
    greedy = SamplingParams(max_new_tokens=6, temperature=0.0, eos_token_ids=NO_EOS)
    full = engine.generate(prompts[:1], greedy)[0].response_ids
    eos = full[2]
    cut_at = full.index(eos)  # first occurrence ends the response
    out = engine.generate(prompts[:1], SamplingParams(max_new_tokens=6, temperature=0.0,
                                                      eos_token_ids=(eos,)))[0]
    assert out.response_ids == full[: cut_at + 1] and out.finish_reason == "stop"
    assert len(out.behaviour_logprobs) == cut_at + 1


def test_stop_string_truncates_at_completing_token(engine, prompts):
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0, eos_token_ids=NO_EOS)
    full = engine.generate(prompts[2:], greedy)[0].response_ids
    text = engine.tokenizer.decode(full)
    stop = text[len(text) // 2 : len(text) // 2 + 3]
    out = engine.generate(prompts[2:], SamplingParams(max_new_tokens=12, temperature=0.0,
                                                      eos_token_ids=NO_EOS, stop=(stop,)))[0]
    k = len(out.response_ids)
    assert out.finish_reason == "stop" and out.response_ids == full[:k]
    assert stop in engine.tokenizer.decode(full[:k]) and stop not in engine.tokenizer.decode(full[: k - 1])


def test_update_weights_changes_samples_and_version(lm_dir, prompts):
    eng = HFEngine.from_pretrained(str(lm_dir))
    greedy = SamplingParams(max_new_tokens=6, temperature=0.0, eos_token_ids=NO_EOS)
    before = eng.generate(prompts, greedy)
    torch.manual_seed(0)
    new = {k: v + 0.5 * torch.randn_like(v) for k, v in eng.model.state_dict().items()}
    eng.update_weights(new.items())
    assert eng.policy_version == 1
    assert torch.equal(eng.model.model.norm.weight, new["model.norm.weight"])
    after = eng.generate(prompts, greedy)
    assert _ids(before) != _ids(after) and after[0].policy_version == 1
    with pytest.raises(ConfigError, match="unknown tensor 'nope'"):
        eng.update_weights([("nope", torch.zeros(1))])


def test_bad_params_name_the_field():
    with pytest.raises(ConfigError, match="top_p"):
        SamplingParams(top_p=0.0)
    with pytest.raises(ConfigError, match="SamplingParams.n=0"):
        SamplingParams(n=0)


def test_top_k_1_is_greedy_but_logprobs_are_untruncated(engine, prompts):
    """top-k filters the draw only: behaviour logprobs stay those of softmax(logits / T)."""
    greedy = engine.generate(prompts, SamplingParams(max_new_tokens=5, temperature=0.0, eos_token_ids=NO_EOS))
    top1 = engine.generate(prompts, SamplingParams(max_new_tokens=5, temperature=1.0, top_k=1,
                                                   seed=9, eos_token_ids=NO_EOS))
    assert _ids(top1) == _ids(greedy)
    assert all(lp < -0.5 for s in top1 for lp in s.behaviour_logprobs)  # not log(1) = 0
    tiny_p = engine.generate(prompts, SamplingParams(max_new_tokens=5, top_p=1e-6, seed=9,
                                                     eos_token_ids=NO_EOS))
    assert _ids(tiny_p) == _ids(greedy)
