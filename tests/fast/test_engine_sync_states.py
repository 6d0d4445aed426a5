"""What an engine wakes and serves during a weight sync (issue 41, items 4 and 5).

- The two-stage wake: after `sleep()` a sync wakes the weights alone and loads into them
  while the KV cache stays freed (its peak: weights and a bucket, not also the KV cache);
  generate wakes the KV cache, as OpenRLHF wakes (`wake_up(tags=["weights"])` before its
  sync, `["kv_cache"]` after).
- Buckets load as they come, so a sync that stops halfway leaves weights of two versions:
  the engine serves `UNKNOWN_VERSION` from the first bucket to the commit, refuses to
  sample under it, and a whole sync gives it a version again.

vLLM's engine is driven over a recording stand-in for `LLM` (`wake_up(tags=...)`: vLLM
0.32's signature, `tasks/engines/vllm/api.tsv`); the HF stand-in follows the same protocol.
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from alignflow.errors import ConfigError, EngineError
from alignflow.tasks.engines import standin
from alignflow.tasks.engines.base import UNKNOWN_VERSION, WAKE_TAGS, SamplingParams
from alignflow.tasks.engines.hf import HFEngine
from alignflow.tasks.engines.vllm.actor import VLLMEngineActor
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig, VLLMSection
from alignflow.tasks.engines.vllm.engine import VLLMEngine
from alignflow.tasks.engines.vllm.progress import Finished
from alignflow.tasks.simulate import node

PARAMS = SamplingParams(max_new_tokens=3, n=2, seed=5)


class RecordingLLM:
    """vLLM's `LLM` as far as `VLLMEngine` calls it; `calls` in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def sleep(self, level: int) -> None:
        self.calls.append(("sleep", level))

    def wake_up(self, tags: list[str] | None = None) -> None:
        self.calls.append(("wake_up", tuple(tags or ())))

    def collective_rpc(self, method: str, args: tuple = ()) -> list:
        self.calls.append((method,))
        return [0]

    def reset_prefix_cache(self) -> None:
        self.calls.append(("reset_prefix_cache",))

    def generate(self, inputs, requests, use_tqdm) -> list:
        self.calls.append(("generate",))
        step = types.SimpleNamespace(logprob=-0.5)
        out = types.SimpleNamespace(token_ids=[7], finish_reason="stop", logprobs=[{7: step}])
        return [types.SimpleNamespace(outputs=[out]) for _ in inputs]


@pytest.fixture
def vllm_engine(monkeypatch) -> VLLMEngine:
    """A `VLLMEngine` on GPUs with sleep mode on, over `RecordingLLM`."""
    fake = types.ModuleType("vllm")
    fake.SamplingParams = lambda **kw: kw
    inputs = types.ModuleType("vllm.inputs")
    inputs.TokensPrompt = lambda **kw: kw
    platforms = types.ModuleType("vllm.platforms")
    platforms.current_platform = types.SimpleNamespace(is_sleep_mode_available=lambda: True,
                                                       device_name="cuda")
    for module in (fake, inputs, platforms):
        monkeypatch.setitem(sys.modules, module.__name__, module)
    engine = object.__new__(VLLMEngine)
    engine.config = VLLMEngineConfig(section=VLLMSection(enable_sleep=True), on_gpu=True,
                                     sync_bucket_bytes=1 << 20)
    engine.model_path = "model"
    engine.policy_version, engine.llm, engine.pack_device = 0, RecordingLLM(), torch.device("cpu")
    engine.tokenizer, engine.vocab_size = types.SimpleNamespace(eos_token_id=2), 512
    engine._tied, engine._shapes, engine._sleeping = False, {"w": [2]}, set()
    engine._before, engine._finished = None, Finished()
    return engine


def test_vllm_wakes_the_weights_for_the_sync_and_the_kv_cache_for_generate(vllm_engine):
    vllm_engine.sleep()
    vllm_engine.update_weights([("w", torch.ones(2))], version=1)
    vllm_engine.generate([[1, 2]], PARAMS)
    order = [c for c in vllm_engine.llm.calls if c[0] in (
        "sleep", "wake_up", "alignflow_stage_bucket", "alignflow_commit_weights", "generate")]
    assert order == [("sleep", 1), ("wake_up", ("weights",)), ("alignflow_stage_bucket",),
                     ("alignflow_commit_weights",), ("wake_up", ("kv_cache",)), ("generate",)]


def test_vllm_wakes_everything_at_once_when_no_sync_comes_between(vllm_engine):
    vllm_engine.sleep()
    vllm_engine.generate([[1, 2]], PARAMS)
    assert [c for c in vllm_engine.llm.calls if c[0] == "wake_up"] == [("wake_up", WAKE_TAGS)]
    assert vllm_engine.wake() is False  # nothing left asleep: vLLM is not asked again


@pytest.fixture
def stand_in(tiny_model_dir, monkeypatch) -> standin.HFStandIn:
    monkeypatch.setenv(node.ENV_NODE, "0")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    config = VLLMSection(max_num_seqs=4, enable_sleep=True).engine_config(
        dtype="fp32", on_gpu=True, colocated=True)
    return standin.HFStandIn(str(tiny_model_dir), config, policy_version=0)


def _noting(events: list, engine: standin.HFStandIn, name: str):
    """`engine.hf.<name>`, noting what of the engine is asleep when it is called."""
    real = getattr(engine.hf, name)

    def call(*args, **kwargs):
        events.append((name, frozenset(engine._sleeping)))
        return real(*args, **kwargs)
    return call


def test_the_stand_in_follows_the_same_order(stand_in, monkeypatch):
    events: list[tuple] = []
    for name in ("load_tensors", "generate"):  # what is still asleep when it loads, samples
        monkeypatch.setattr(stand_in.hf, name, _noting(events, stand_in, name))
    assert stand_in.sleep() is True
    weights = {k: v + 0.25 for k, v in stand_in.hf.model.state_dict().items()}
    stand_in.update_weights(weights.items(), version=1)
    stand_in.generate([[5, 6, 7]], PARAMS)
    loads = [asleep for name, asleep in events if name == "load_tensors"]
    assert loads and all(asleep == {"kv_cache"} for asleep in loads)  # weights awake only
    assert events[-1] == ("generate", frozenset())
    assert stand_in.policy_version == 1


def test_engines_without_sleep_mode_answer_false(tiny_model_dir):
    hf = HFEngine.from_pretrained(str(tiny_model_dir))
    assert hf.sleep() is False and hf.wake() is False and hf.wake(("weights",)) is False


def test_vllm_serves_no_version_after_a_sync_that_stopped_halfway(vllm_engine):
    vllm_engine._shapes = {"a": [1 << 18], "b": [2]}  # "a" fills a 1 MiB bucket: sent
    with pytest.raises(ConfigError, match="unknown tensor 'nope'"):
        vllm_engine.update_weights([("a", torch.ones(1 << 18)), ("b", torch.ones(2)),
                                    ("nope", torch.ones(2))], version=1)
    assert ("alignflow_stage_bucket",) in vllm_engine.llm.calls  # some of it was loaded
    assert vllm_engine.llm.calls[-1] == ("alignflow_drop_staged",)  # the reload closed
    assert vllm_engine.policy_version == UNKNOWN_VERSION
    with pytest.raises(EngineError, match="sync it again"):
        vllm_engine.generate([[1, 2]], PARAMS)
    vllm_engine.update_weights([("a", torch.ones(1 << 18)), ("b", torch.ones(2))], version=2)
    assert vllm_engine.policy_version == 2
    assert vllm_engine.generate([[1, 2]], PARAMS)[0].policy_version == 2


def test_the_stand_in_serves_no_version_until_a_whole_sync(stand_in, tiny_model_dir):
    weights = {k: v + 0.25 for k, v in stand_in.hf.model.state_dict().items()}
    first = next(iter(weights))
    with pytest.raises(ConfigError, match="unknown tensor"):
        stand_in.update_weights([(first, weights[first]), ("nope", torch.zeros(1))],
                                version=1)
    assert stand_in.policy_version == UNKNOWN_VERSION
    with pytest.raises(EngineError, match="sync it again"):
        stand_in.generate([[5, 6, 7]], PARAMS)
    stand_in.update_weights(weights.items(), version=2)
    clean = HFEngine.from_pretrained(str(tiny_model_dir), micro_rollout_batch_size=4)
    clean.update_weights(weights.items(), version=2)
    assert stand_in.generate([[5, 6, 7]], PARAMS) == clean.generate([[5, 6, 7]], PARAMS)


def test_engines_a_failed_sync_reached_serve_no_version_in_their_fleet():
    """`VLLMEngineActor` (Ray not needed here): the engines up when a sync broke are behind
    every version, so the host syncs them before their next generate; one restarting
    meanwhile keeps the version its restart loads."""
    fleet = object.__new__(VLLMEngineActor)
    fleet._versions, fleet._starting, fleet._target = [3, 3, 3], {2: "starting"}, 3
    fleet.transport, fleet.config = "ray", VLLMEngineConfig()
    fleet._live = lambda: {0: "engine 0", 1: "engine 1"}
    fleet._begin_sync = lambda live, timeout: live

    def broken(named, timeout, live) -> None:
        raise EngineError("vLLM sync failed on 1 of 2 engines")
    fleet._send_by_ray = broken
    with pytest.raises(EngineError):
        fleet.update_weights([], version=4)
    assert fleet._versions == [UNKNOWN_VERSION, UNKNOWN_VERSION, 3] and fleet._target == 3
    assert fleet.policy_version == UNKNOWN_VERSION
