"""A supervised run's generation engines outlive the host process that drives them
(`flows/ray/adopt.py` helpers, `tasks/engines/vllm/engine_host.py`), on a real Ray runtime:
- an engine whose process dies is started again by Ray, and knows it: it serves no sample
  and commits no partial sync until a whole sync has given it weights again;
- the host's replacement takes over the running engines instead of starting new ones, and
  syncs them before their first generate.
The engines are the HF stand-in for vLLM (the simulated-node variable in their
environment), as on a simulated cluster."""

from __future__ import annotations

import os
import signal
import time

import pytest

from alignflow import detached
from alignflow.errors import EngineError
from alignflow.tasks.engines.base import SamplingParams
from alignflow.tasks.engines.vllm import actor as vllm_actor
from alignflow.tasks.engines.vllm import placement
from alignflow.tasks.engines.vllm.config import VLLMEngineConfig
from alignflow.tasks.engines.vllm.engine_host import UNKNOWN_VERSION, EngineHost
from alignflow.tasks.engines.vllm.weights import pack_buckets
from alignflow.tasks.modeling.loading import load_causal_lm
from alignflow.tasks.simulate import node

pytestmark = pytest.mark.slow

CONFIG = VLLMEngineConfig(dtype="float32", on_gpu=False)
GREEDY = SamplingParams(max_new_tokens=4, temperature=0.0)
STAND_IN = {node.ENV_NODE: "0"}  # the HF stand-in answers for vLLM, as on a simulated node


def _restarted(ray, engine, pid: int, timeout: float = 120) -> int:
    """Kill the engine's process; wait until Ray has started it again; its new pid."""
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            new = ray.get(engine.pid.remote(), timeout=30)
            if new != pid:
                return new
        except ray.exceptions.RayActorError:
            time.sleep(0.2)  # dead, not yet restarted: a call fails until it is
    raise AssertionError("Ray did not start the killed engine again")


class _Probe(EngineHost):
    def pid(self) -> int:
        return os.getpid()


def test_an_engine_ray_restarts_refuses_work_until_a_whole_sync(ray_local, tiny_model_dir):
    ray = ray_local
    name = f"alignflow:t{os.getpid()}:actor:engine:0"
    # as the fleet makes it: `progress` answered on a thread of its own (vllm/actor.py)
    engine = ray.remote(concurrency_groups={"progress": 1})(_Probe).options(
        **detached.helper_options(name), num_cpus=0,
        runtime_env={"env_vars": STAND_IN}).remote(str(tiny_model_dir), CONFIG, 3)
    try:
        assert ray.get(engine.version.remote()) == 3  # a first start is not a restart
        ray.get(engine.generate.remote([[1, 2, 3]], GREEDY, 0))
        _restarted(ray, engine, ray.get(engine.pid.remote()))
        assert ray.get(engine.version.remote()) == UNKNOWN_VERSION
        with pytest.raises(EngineError, match="restarted by Ray"):
            ray.get(engine.generate.remote([[1, 2, 3]], GREEDY, 0))
        weights = list(load_causal_lm(str(tiny_model_dir), dtype="fp32").state_dict().items())
        (first, *_) = pack_buckets(weights, 1 << 20)
        for call in (engine.commit_weights.remote(4),  # no drop_staged in this life: a part
                     engine.stage_bucket.remote(*first.as_args()),  # of a sync it lost
                     engine.receive_bucket.remote(*first.as_args()[:4], 16)):
            with pytest.raises(EngineError, match="restarted by Ray"):
                ray.get(call)
        ray.get(engine.drop_staged.remote())
        for bucket in pack_buckets(weights, 1 << 20):
            ray.get(engine.stage_bucket.remote(*bucket.as_args()))
        assert ray.get(engine.commit_weights.remote(4)) == 4
        assert len(ray.get(engine.generate.remote([[1, 2, 3]], GREEDY, 0))) == 1
    finally:
        detached.discard([name])


def test_the_hosts_replacement_takes_over_its_engines(ray_local, tiny_model_dir, monkeypatch):
    ray = ray_local
    monkeypatch.setattr(placement, "cpu_env", lambda cores: dict(STAND_IN))
    monkeypatch.setattr(vllm_actor, "EngineHost", _Probe)
    detached.own(f"alignflow:t{os.getpid()}:actor")  # as a supervised group's worker is told
    try:
        first = vllm_actor.VLLMEngineActor(str(tiny_model_dir), CONFIG, num_engines=2,
                                           num_cpus_per_engine=0.01, on_gpu=False)
        pids = ray.get([a.pid.remote() for a in first._actors])
        del first  # the host's process is gone; what it named outlives it
        again = vllm_actor.VLLMEngineActor(str(tiny_model_dir), CONFIG, num_engines=2,
                                           num_cpus_per_engine=0.01, on_gpu=False)
        assert ray.get([a.pid.remote() for a in again._actors]) == pids  # none started
        assert again.policy_version == UNKNOWN_VERSION  # behind the host: synced first
        _restarted(ray, again._actors[1], pids[1])
        with pytest.raises(EngineError, match=r"no engine serves policy version 0"):
            again.generate([[1, 2, 3]] * 2, GREEDY)  # none was synced since the take-over
        assert again._actors[1] is not None and again.policy_version == UNKNOWN_VERSION
        model = load_causal_lm(str(tiny_model_dir), dtype="fp32")
        again.update_weights(model.state_dict().items(), version=0)
        assert again.policy_version == 0
        assert len(again.generate([[1, 2, 3]] * 2, GREEDY)) == 2
        again.shutdown()
    finally:
        detached.own("")
        detached.discard([f"alignflow:t{os.getpid()}:actor:engine:{i}" for i in range(2)])
