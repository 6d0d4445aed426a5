"""`--executor auto` (the CLI's default): Ray only where a run needs more than one process.

In-process Ray costs a single-process run its fixed price — the GCS, the raylet and its
agents, a driver and a model host each holding torch: about 5 s and twice the memory of the
same work in one process (`bench/RESULTS.md`, peers). Both executors run the same durable
flow (same commits, same resume, bitwise), so a run that fits one process runs in this one:
no cluster named, no GPU on this machine (GPU placement goes through Ray), one worker per
role, every role on one host, no generator worker (asynchronous RL, agents), no DeepSpeed
and no vLLM engine. Anything else gets Ray, and so does every flow whose config does not
place its workers (user flows, whose tasks may fan out; the loops). The choice is recorded
in the run's metadata; `resume` keeps it.
"""

from __future__ import annotations

import importlib.util
import os
from typing import Any

CHOICES = ("auto", "ray", "inline")


def resolve(requested: str, address: str | None, config: Any) -> tuple[str, str]:
    """(executor, why): the executor `requested` names, or the one `auto` picks for `config`."""
    if requested != "auto":
        return requested, ""
    reason = ray_reason(address, config)
    if reason:
        return "ray", reason
    return "inline", "one process is enough; --executor ray runs it on Ray"


def ray_reason(address: str | None, config: Any) -> str | None:
    """Why `config` needs Ray, or None when the whole run fits in this process."""
    if address:
        return "a Ray cluster is named (--address)"
    if machine_has_gpu():
        return "this machine has GPUs (placed through Ray)"
    if not hasattr(config, "placement") or not hasattr(config, "ds"):
        return "the flow's config does not place its workers (user flows, loops)"
    if getattr(config, "uses_generator", False):
        return "generation runs on a worker of its own (async.*, agents)"
    if config.ds.uses_deepspeed:
        return "DeepSpeed trains in worker processes"
    return _roles_reason(config) or _engine_reason(config)


def _roles_reason(config: Any) -> str | None:
    sections = [getattr(config, role, None) for role in ("actor", "critic", "ref", "reward")]
    workers = [s.workers for s in sections if hasattr(s, "workers")]
    workers.append(getattr(config.placement, "workers", 1))
    if max(workers) > 1:
        return f"{max(workers)} workers per role (num_nodes × num_gpus_per_node)"
    if config.placement.num_gpus > 0:
        return "placement.num_gpus asks for GPUs"
    train = getattr(config, "train", None)
    if getattr(train, "all_in_one", True) is False:
        return "roles are placed on separate hosts (train.colocate_*)"
    return None


def _engine_reason(config: Any) -> str | None:
    """`rollout.engine=vllm`, or auto with vLLM engines asked for (the CPU half of
    `tasks/steps/rollout_engine.choose_engine`, restated: the engine layer imports no task)."""
    engine = getattr(getattr(config, "rollout", None), "engine", "hf")
    engines = getattr(getattr(config, "vllm", None), "num_engines", 0)
    if engine == "vllm" or (engine == "auto" and engines > 0 and importlib.util.find_spec("vllm")):
        return "vLLM generation engines run as Ray actors"
    return None


def machine_has_gpu() -> bool:
    """An NVIDIA device this process may use (checked without importing torch)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None and visible.strip() in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidia0") or bool(_listdir("/proc/driver/nvidia/gpus"))


def _listdir(path: str) -> list[str]:
    try:
        return os.listdir(path)
    except OSError:
        return []
