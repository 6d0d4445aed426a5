"""Which GPUs of a plan hold what: one `GpuSet` per distinct set of models and engines on a
GPU (a host's rank 0 with its in-process engine apart from its other ranks, every rank
alike when each drives an engine of its own (`EnginePlan.per_rank`), hybrid engine
ranks apart from the host GPUs without one, the vLLM engines' own GPUs, hosts at fractions
of a GPU packed together as Ray packs them)."""

from __future__ import annotations

from dataclasses import dataclass

from alignflow.tasks.engines.vllm.config import VLLMEngineConfig
from alignflow.tasks.plan.hosts import EnginePlan, HostPlan
from alignflow.tasks.plan.records import RunPlan


@dataclass(frozen=True)
class GpuSet:
    """`count` GPUs alike: the hosts whose workers sit on each, and the engine rank on each
    (`engine`: "" none, "hf" or "vllm" in a host's process, "vllm actor" in its own)."""

    name: str
    count: int
    hosts: tuple[HostPlan, ...]
    engine: str = ""
    vllm: VLLMEngineConfig | None = None
    tensor_parallel: int = 1

    @property
    def roles(self) -> tuple[str, ...]:
        return tuple(r for h in self.hosts for r in h.roles)


def gpu_sets(plan: RunPlan) -> list[GpuSet]:
    """The plan's GPUs, grouped by what they hold (none on a plan without GPUs)."""
    out: list[GpuSet] = []
    for host in plan.groups:
        if host.gpus_per_worker >= 1:
            out += _host_sets(plan, host)
    packed = tuple(h for h in plan.groups if 0 < h.gpus_per_worker < 1)
    if packed:
        name = "shared GPU (" + ", ".join(h.name for h in packed) + ")"
        engine = next(filter(None, map(_in_process, packed)), None)
        out.append(GpuSet(name, 1, packed, engine=engine.kind if engine else "",
                          vllm=engine.vllm if engine else None))
    e = plan.engines
    if e is not None and not e.hybrid and e.gpus_each >= 1:
        out.append(GpuSet("vLLM engines", e.count * e.tensor_parallel, (), engine="vllm actor",
                          vllm=_engine_config(plan), tensor_parallel=e.tensor_parallel))
    return out


def _in_process(host: HostPlan) -> EnginePlan | None:
    """The host's engine when it runs in the host's own GPU processes."""
    engine = host.engine
    return engine if engine is not None and engine.in_host and engine.on_gpu else None


def _engine_config(plan: RunPlan) -> VLLMEngineConfig | None:
    driver = plan.host(plan.engines.host) if plan.engines else None
    return driver.engine.vllm if driver is not None and driver.engine else None


def _host_sets(plan: RunPlan, host: HostPlan) -> list[GpuSet]:
    """A host's GPUs: those with an engine rank, then the rest."""
    workers = host.workers
    e = plan.engines
    if e is not None and e.hybrid and e.host == host.name:
        ranks = min(e.count * e.tensor_parallel, workers)
        with_engine = GpuSet(f"{host.name} with a vLLM rank", ranks, (host,),
                             engine="vllm actor", vllm=_engine_config(plan),
                             tensor_parallel=e.tensor_parallel)
        rest = [GpuSet(host.name, workers - ranks, (host,))] if workers > ranks else []
        return [with_engine, *rest]
    engine = _in_process(host)
    if engine is not None and engine.per_rank:  # an engine in every rank's process
        return [GpuSet(f"{host.name} with a vLLM engine", workers, (host,),
                       engine=engine.kind, vllm=engine.vllm)]
    if engine is not None:
        first = GpuSet(f"{host.name} rank 0" if workers > 1 else host.name, 1, (host,),
                       engine=engine.kind, vllm=engine.vllm)
        others = "rank 1" if workers == 2 else f"ranks 1-{workers - 1}"
        rest = [GpuSet(f"{host.name} {others}", workers - 1, (host,))] if workers > 1 else []
        return [first, *rest]
    return [GpuSet(host.name, workers, (host,))]
