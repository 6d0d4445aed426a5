"""A lost generation engine costs a host no retry (`tasks/engines/vllm/fleet.py`), on a real
Ray runtime with two engines (the HF stand-in for vLLM, as on a simulated node):
- the engine's process is killed; the next generate returns the very samples both engines
  give (its shard sampled on the other engine: same prompts, offsets, seed, weights);
- the lost engine starts again in the background, unnamed (killed and spawned anew) or
  named in a supervised run (Ray starts it again by itself); once up it is behind, serves
  nothing until a sync, and the sync forms the broadcast group again with it;
- an engine lost between two calls (the most likely moment: it is idle most of the time)
  does not hold the next sync until its restart answers: Ray's control store knows at once,
  and the sync goes on with the engines left.
"""

from __future__ import annotations

import os
import signal
import time

import pytest

from alignflow import detached
from alignflow.tasks.engines.base import SamplingParams
from alignflow.tasks.engines.vllm import actor as vllm_actor
from alignflow.tasks.engines.vllm import placement
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig
from alignflow.tasks.engines.vllm.engine_host import UNKNOWN_VERSION, EngineHost
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.simulate import node

pytestmark = pytest.mark.slow

CONFIG = VLLMEngineConfig(dtype="float32", on_gpu=False)
SAMPLED = SamplingParams(max_new_tokens=6, n=2, seed=11, temperature=0.9, top_k=40)
PROMPTS = [[1, 2, 3], [4, 5], [6, 7, 8, 9], [10, 11]]
HOLD = "ALIGNFLOW_TEST_HOLD"  # a file: an engine (re)started while it exists waits for it


class _Probe(EngineHost):
    def __init__(self, *args) -> None:
        hold = os.environ.get(HOLD)
        while hold and os.path.exists(hold):  # held in its start until the test lets go
            time.sleep(0.05)
        super().__init__(*args)

    def pid(self) -> int:
        return os.getpid()


@pytest.fixture
def engines(ray_local, tiny_model_dir, monkeypatch, request, tmp_path):
    hold = tmp_path / "hold"
    monkeypatch.setattr(placement, "cpu_env", lambda cores: {node.ENV_NODE: "0", HOLD: str(hold)})
    monkeypatch.setattr(vllm_actor, "EngineHost", _Probe)
    group = f"alignflow:d{os.getpid()}:{request.param}:actor"
    if request.param == "named":
        detached.own(group)  # as a supervised group's worker is told
    built = vllm_actor.VLLMEngineActor(str(tiny_model_dir), CONFIG, num_engines=2,
                                       num_cpus_per_engine=0.01, on_gpu=False,
                                       transport="gloo")
    try:
        yield built, hold
    finally:
        hold.unlink(missing_ok=True)
        built.shutdown()
        detached.own("")
        detached.discard([f"{group}:engine:{i}" for i in range(2)])


def _samples(out) -> list:
    return [(s.prompt_index, s.sample_index, s.response_ids, s.behaviour_logprobs,
             s.policy_version) for s in out]


@pytest.mark.parametrize("engines", ["unnamed", "named"], indirect=True)
def test_a_lost_engine_costs_no_retry_and_is_synced_once_up(engines, ray_local, tiny_model_dir):
    ray, (engines, hold) = ray_local, engines
    weights = load_causal_lm(str(tiny_model_dir), dtype="fp32").state_dict()
    engines.update_weights(weights.items(), version=1)
    both = _samples(engines.generate(PROMPTS, SAMPLED))
    assert {s[4] for s in both} == {1}

    hold.touch()  # the lost engine's next start waits until the test lets go
    os.kill(ray.get(engines._actors[1].pid.remote()), signal.SIGKILL)
    assert _samples(engines.generate(PROMPTS, SAMPLED)) == both  # no EngineError, same samples
    assert list(engines._starting) == [1] and engines.policy_version == 1

    engines.update_weights(weights.items(), version=2)  # engine 0 alone: 1 is starting
    assert engines._sender.members == (0,) and engines.policy_version == 2
    assert {s[4] for s in _samples(engines.generate(PROMPTS, SAMPLED))} == {2}

    hold.unlink()
    engines._ready(every=True)
    behind = UNKNOWN_VERSION if engines._names else 0  # Ray's restart, or a fresh spawn
    assert engines._versions == [2, behind] and engines.policy_version == behind
    assert {s[4] for s in _samples(engines.generate(PROMPTS, SAMPLED))} == {2}  # not from 1

    engines.update_weights(weights.items(), version=3)  # the group formed again with both
    assert engines._versions == [3, 3] and engines._sender.members == (0, 1)
    again = _samples(engines.generate(PROMPTS, SAMPLED))
    assert [s[:4] for s in again] == [s[:4] for s in both] and {s[4] for s in again} == {3}


@pytest.mark.parametrize("engines", ["unnamed", "named"], indirect=True)
def test_an_engine_lost_between_calls_leaves_the_sync_to_the_others(engines, ray_local,
                                                                    tiny_model_dir):
    ray, (engines, hold) = ray_local, engines
    weights = load_causal_lm(str(tiny_model_dir), dtype="fp32").state_dict()
    engines.update_weights(weights.items(), version=1)
    hold.touch()  # its restart waits until the test lets go: so would a call sent to it
    os.kill(ray.get(engines._actors[1].pid.remote()), signal.SIGKILL)
    deadline = time.monotonic() + 30
    while not detached.not_alive({1: engines._actors[1]}) and time.monotonic() < deadline:
        time.sleep(0.02)  # Ray knows; this caller has not called it since
    assert detached.not_alive({1: engines._actors[1]}) == {1}

    engines.update_weights(weights.items(), version=2)  # no EngineError, no wait for 1
    assert engines._sender.members == (0,) and engines._versions[0] == 2
    assert list(engines._starting) == [1] and engines._restarts[1] == 1
    assert {s[4] for s in _samples(engines.generate(PROMPTS, SAMPLED))} == {2}

    hold.unlink()
    engines._ready(every=True)
    engines.update_weights(weights.items(), version=3)  # formed again with both
    assert engines._versions == [3, 3] and engines._sender.members == (0, 1)
