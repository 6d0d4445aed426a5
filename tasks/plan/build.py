"""A run's plan from what its config asks (`RunAsk`, filled by each family's config) and the
cluster it runs on: every placement rule applied once (`rules.py`), nothing probed later.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from alignflow.tasks.engines.vllm.config import VLLMSection
from alignflow.tasks.modeling.lora_config import LoraConfig
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.hosts import EnginePlan, HostPlan, TrainerPlan, VLLMEngines
from alignflow.tasks.plan.memory.ask import MemoryAsk
from alignflow.tasks.plan.memory.build import with_memory
from alignflow.tasks.plan.placement import PlacementConfig, Workers
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.trainers.config import TrainerConfig
from alignflow.tasks.trainers.deepspeed.section import DSConfig

GENERATOR = "rollout"  # the generator worker's name


@dataclass(frozen=True, kw_only=True)
class HostAsk:
    """One host a flow asks for: its roles and workers, the roles it trains (with their
    settings), whether it generates, and whether it holds a model at all."""

    name: str
    roles: tuple[str, ...]  # RL's roles (actor, ref, critic, reward), or "model", "teacher"
    workers: Workers = field(default_factory=Workers)
    trains: tuple[tuple[str, TrainerConfig], ...] = ()
    generates: bool = False
    holds_model: bool = True
    # a GPU per worker where the cluster has them, unasked: the RL hosts; the offline and
    # loop hosts train on the CPU unless placement asks (their train step keeps its batches
    # on the CPU)
    gpus_by_default: bool = True
    note: str = ""


@dataclass(frozen=True, kw_only=True)
class RunAsk:
    """What a flow's config asks of the cluster."""

    hosts: tuple[HostAsk, ...]
    placement: PlacementConfig = field(default_factory=PlacementConfig)  # per worker
    ds: DSConfig = field(default_factory=DSConfig)  # the trainers' backend, the dtype
    engine: rules.EngineName = "hf"  # rollout.engine
    vllm: VLLMSection = field(default_factory=VLLMSection)
    colocated: bool = True  # every role on one host (train.colocate_all)
    # train.colocate_all=true as asked (OpenRLHF's --colocate_all_models): the vLLM engines
    # share the host's GPUs too (the hybrid engine), one inside each worker where they can
    hybrid: bool = False
    generator: bool = False  # generation on a worker of its own (async, agents)
    # what the memory plan reads beyond the plan (`memory/ask.py`; a callable: read only
    # when the plan has GPUs); None: no memory plan
    memory: MemoryAsk | Callable[[], MemoryAsk] | None = None


def build(ask: RunAsk, cluster: Cluster) -> RunPlan:
    """The plan of `ask` on `cluster` (never refused here: `RunPlan.check_fits` says whether
    the cluster holds it)."""
    hosts = _numbered(tuple(_host(h, ask, cluster) for h in ask.hosts))
    generator = _generator(ask, cluster) if ask.generator else None
    groups = hosts + ((generator,) if generator else ())
    shared = ask.hybrid and hosts[0].gpus > 0  # hybrid: within the colocated host's GPUs
    engines = next((_engines(g, g.engine, ask.vllm, hybrid=shared) for g in groups
                    if g.engine and not g.engine.in_host), None)
    reason = rules.ray_reason(cluster, groups, generator=ask.generator, engines=engines,
                              colocated=ask.colocated)
    plan = RunPlan(cluster=cluster, hosts=hosts, generator=generator, engines=engines,
                   colocated=ask.colocated, executor="ray" if reason else "inline",
                   executor_reason=reason or rules.INLINE)
    return with_memory(plan, ask.memory) if ask.memory is not None else plan


def _numbered(hosts: tuple[HostPlan, ...]) -> tuple[HostPlan, ...]:
    """Each host's first GPU when all share one process: after the GPUs of those before
    it (fractions pack onto one GPU)."""
    out, used = [], 0.0
    for host in hosts:
        out.append(dataclasses.replace(host, first_gpu=int(used + 1e-9)))
        used += host.gpus
    return tuple(out)


def _host(ask_host: HostAsk, ask: RunAsk, cluster: Cluster) -> HostPlan:
    gpus = rules.worker_gpus(ask.placement.num_gpus, cluster, holds_model=ask_host.holds_model,
                             by_default=ask_host.gpus_by_default)
    workers = ask_host.workers
    trainers = tuple(_trainer(role, config, ask.ds, workers.workers)
                     for role, config in ask_host.trains)
    # the engine may live in the actor's processes: hybrid (train.colocate_all), or the one
    # engine vllm.num_engines=0 asks for where the policy is (OpenRLHF generates there too)
    shares = ask.hybrid or ask.vllm.num_engines == 0
    engine = _engine(ask, cluster, on_gpu=gpus > 0, colocated=shares,
                     workers=workers.workers) if ask_host.generates else None
    return HostPlan(name=ask_host.name, roles=ask_host.roles, nodes=workers.num_nodes,
                    workers_per_node=workers.num_gpus_per_node, gpus_per_worker=gpus,
                    cpus_per_worker=ask.placement.num_cpus, holds_model=ask_host.holds_model,
                    trainers=trainers, engine=engine, note=ask_host.note,
                    beside=getattr(workers, "beside", ()) if gpus > 0 else ())


def _trainer(role: str, config: TrainerConfig, ds: DSConfig, world_size: int) -> TrainerPlan:
    """The role's trainer on the run's backend; a value model (the critic) takes no
    adapters and no 4-bit base."""
    if role == "critic":
        ds = dataclasses.replace(ds, lora=LoraConfig(), load_in_4bit=False)
    return TrainerPlan(role=role, backend="deepspeed" if ds.uses_deepspeed else "torch",
                       world_size=world_size, ds=ds, config=config)


def _engine(ask: RunAsk, cluster: Cluster, *, on_gpu: bool, colocated: bool,
            workers: int = 1) -> EnginePlan:
    installed = True if cluster.vllm_assumed else None
    kind = rules.engine_kind(ask.engine, ask.vllm, on_gpu=on_gpu, installed=installed)
    if kind == "hf":
        return EnginePlan(kind="hf", in_host=True, on_gpu=on_gpu)
    in_host = rules.vllm_in_host(ask.vllm, colocated=colocated, on_gpu=on_gpu,
                                 per_worker=workers if ask.hybrid else 1)
    config = ask.vllm.engine_config(dtype=ask.ds.param_dtype, on_gpu=on_gpu, colocated=in_host)
    per_rank = in_host and ask.hybrid and ask.vllm.engines == workers > 1
    return EnginePlan(kind="vllm", in_host=in_host, on_gpu=on_gpu, vllm=config,
                      per_rank=per_rank)


def _generator(ask: RunAsk, cluster: Cluster) -> HostPlan:
    """The generator worker: an engine in a process of its own (on its GPU where the
    cluster has them); with vLLM engines in actors it only drives them."""
    gpus = rules.worker_gpus(ask.placement.num_gpus, cluster, holds_model=True)
    engine = _engine(ask, cluster, on_gpu=gpus > 0, colocated=True)
    return HostPlan(name=GENERATOR, roles=(), gpus_per_worker=gpus if engine.in_host else 0.0,
                    cpus_per_worker=ask.placement.num_cpus, holds_model=engine.in_host,
                    engine=engine)


def _engines(host: HostPlan, engine: EnginePlan, vllm: VLLMSection, *,
             hybrid: bool) -> VLLMEngines:
    on_gpu = engine.on_gpu
    return VLLMEngines(host=host.name, count=vllm.engines,
                       tensor_parallel=vllm.tensor_parallel_size,
                       gpus_each=float(vllm.tensor_parallel_size) if on_gpu else 0.0,
                       transport=rules.engines_transport(vllm, on_gpu=on_gpu, hybrid=hybrid),
                       hybrid=hybrid and on_gpu)
