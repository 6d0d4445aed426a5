"""vLLM engines in Ray actors: prompts spread over two engines, sync, hung engines, restarts.

One scenario in one test: each engine start costs ~20-40 s on this machine, so the steps
share two engines (one core each) and run in order.
"""

import time

import pytest

pytest.importorskip("vllm")

import torch

from alignflow.artifacts import checkpoints
from alignflow.errors import EngineError
from alignflow.tasks.engines.base import GenerationEngine, SamplingParams
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.engines.vllm.actor import VLLMEngineActor, _shards
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig, VLLMSection
from alignflow.tasks.engines.vllm.placement import bind_spec, cpu_core_groups
from tests.vllm.test_vllm_engine import NO_EOS, TEXTS, assert_logprobs_match

CONFIG = VLLMEngineConfig(dtype="float32", section=VLLMSection(
    kv_cache_gib=1 / 16, max_model_len=512, generate_timeout_s=120, enable_prefix_caching=True))


def test_shards_and_core_groups():
    assert _shards(5, 2) == [(0, 3), (3, 5)]
    assert _shards(1, 3) == [(0, 1), (1, 1), (1, 1)]
    assert [bind_spec(c) for c in ([0], [0, 1], [2, 3, 4], [0, 2])] == ["0", "0-1", "2-4", "0,2"]
    groups = cpu_core_groups(2)
    assert len(groups) == 2 and all(len(g) == len(groups[0]) >= 1 for g in groups)


def _perturbed(model, scale: float, seed: int) -> dict[str, torch.Tensor]:
    """New values for every parameter (tied ones once, as a trainer would send them)."""
    g = torch.Generator().manual_seed(seed)
    return {k: v.detach() + scale * torch.randn(v.shape, generator=g)
            for k, v in model.named_parameters()}


def test_engines_in_ray_actors(ray_local, vllm_model_dir, local_store):
    hf = HFEngine.from_pretrained(str(vllm_model_dir))
    prompts = [hf.tokenizer.encode(t) for t in TEXTS] * 2
    sampled = SamplingParams(max_new_tokens=10, n=2, seed=4, temperature=0.9, top_k=30,
                             eos_token_ids=NO_EOS)
    engines = VLLMEngineActor(str(vllm_model_dir), CONFIG, num_engines=2)
    try:
        assert isinstance(engines, GenerationEngine)
        # 1. six prompts over two engines: greedy equals HF; samples ordered, seeded, exact
        greedy = SamplingParams(max_new_tokens=12, temperature=0.0, eos_token_ids=NO_EOS)
        ours = engines.generate(prompts, greedy)
        assert [s.response_ids for s in ours] == [s.response_ids for s in hf.generate(prompts, greedy)]
        out = engines.generate(prompts, sampled)
        assert [(s.prompt_index, s.sample_index) for s in out] == [(p, k) for p in range(6)
                                                                   for k in range(2)]
        # prompts 3..5 repeat 0..2 on the other engine; their seeds differ by prompt index
        assert [s.response_ids for s in out[:6]] != [s.response_ids for s in out[6:]]
        assert_logprobs_match(hf.model, out, 0.9)
        # 2. a checkpoint every engine reads from the store
        hf.update_weights(_perturbed(hf.model, 0.05, 1).items())
        checkpoints.save(local_store, "ckpt/one", hf.model.state_dict(), rng=False)
        engines.load_checkpoint(local_store, "ckpt/one", version=3)
        assert engines.policy_version == 3
        assert_logprobs_match(hf.model, engines.generate(prompts, sampled), 0.9)
        # 3. an actor that died: its shard is sampled on the other engine (no error); it
        # comes back from the checkpoint in the background
        import ray

        ray.kill(engines._actors[1], no_restart=True)
        again = engines.generate(prompts, sampled)
        assert all(s.policy_version == 3 for s in again)
        assert_logprobs_match(hf.model, again, 0.9)
        engines._ready(every=True)
        assert engines._versions == [3, 3]
        # 4. in-memory sync in buckets reaches both engines
        ckpt_model = HFEngine.from_pretrained(str(vllm_model_dir))
        ckpt_model.update_weights(hf.model.state_dict().items())
        hf.update_weights(_perturbed(hf.model, 0.05, 2).items())
        engines.update_weights(hf.model.state_dict().items())
        assert engines.policy_version == 4
        assert_logprobs_match(hf.model, engines.generate(prompts, sampled), 0.9)
        # 5. a generate that outlasts a short liveness window finishes while it makes
        # progress (the engine answers `progress()` on its own thread as it runs)
        started = time.monotonic()
        long = engines.generate(prompts[:1], SamplingParams(
            max_new_tokens=480, n=8, seed=7, eos_token_ids=NO_EOS), timeout_s=0.5)
        print(f"a 0.5 s liveness window, a generate of {time.monotonic() - started:.2f} s")
        assert [len(s.response_ids) for s in long] == [480] * 8
        # 6. an engine quiet for the liveness window (one prompt: only engine 0 works on it;
        # 0.01 s: less than its first answer takes): engine 0 is restarted from the
        # checkpoint, engine 1 keeps the synced weights and serves alone
        with pytest.raises(EngineError, match=r"engine 0: no progress for 0.01s"):
            engines.generate(prompts[:1], SamplingParams(max_new_tokens=300, n=4,
                                                         eos_token_ids=NO_EOS), timeout_s=0.01)
        assert list(engines._starting) == [0] and engines.policy_version == 4  # those up
        engines._ready(every=True)
        assert engines.policy_version == 3  # engine 0 is back with the checkpoint: behind
        served = engines.generate(prompts, sampled)  # by engine 1 alone: it serves version 4
        assert {s.policy_version for s in served} == {4}
        assert_logprobs_match(hf.model, served, 0.9)
        engines.load_checkpoint(local_store, "ckpt/one", version=3)  # every engine: version 3
        assert_logprobs_match(ckpt_model.model, engines.generate(prompts, sampled), 0.9)
        # 7. sync by broadcast over a gloo group made for it; an engine lost between two
        # calls does not hold the next sync (it goes on without it while the engine starts
        # again, from the checkpoint: behind), and the sync after forms the group with both
        engines.transport = "gloo"
        hf.update_weights(_perturbed(hf.model, 0.05, 3).items())
        engines.update_weights(hf.model.state_dict().items(), version=5)
        assert engines.policy_version == 5
        assert_logprobs_match(hf.model, engines.generate(prompts, sampled), 0.9)
        ray.kill(engines._actors[0], no_restart=True)
        hf.update_weights(_perturbed(hf.model, 0.05, 4).items())
        engines.update_weights(hf.model.state_dict().items(), version=6)
        engines._ready(every=True)
        assert engines._versions == [3, 6]
        engines.update_weights(hf.model.state_dict().items(), version=7)
        assert engines.policy_version == 7
        assert_logprobs_match(hf.model, engines.generate(prompts, sampled), 0.9)
    finally:
        engines.shutdown()
