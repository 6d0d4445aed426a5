"""A process on a simulated node: its fake GPUs, the device it believes it has, and the
fake GPU a tensor was placed on.

A simulated node's processes carry `ALIGNFLOW_SIMULATED_NODE` (its index); Ray sets their
`CUDA_VISIBLE_DEVICES` from the fake GPU ids it assigned. Such a process takes the GPU
branch wherever code decides what to place, reserve or join (`gpu_process`: NCCL groups,
`cuda:<i>` in the books), and keeps its tensors on the CPU, where the math runs. NCCL
refuses a CPU tensor, so "on the CPU" cannot tell a tensor meant for the GPU from one left
on the host: the device helper marks the tensors it places on a fake GPU (`place`), and
the strict group reads that mark (`device_of`). Importing this module needs no torch.
"""

from __future__ import annotations

import os
import sys
from typing import Any

ENV_NODE = "ALIGNFLOW_SIMULATED_NODE"  # the simulated node's index, on all its processes
ENV_DIR = "ALIGNFLOW_SIMULATED_DIR"  # the simulated cluster's folder (sightings)
LABEL = "alignflow.simulated-node"  # the Ray node label holding the index
MARK = "_alignflow_simulated_device"  # attribute of a tensor placed on a fake GPU


def index() -> int | None:
    """This process's simulated node, or None off a simulated cluster."""
    value = os.environ.get(ENV_NODE, "")
    return int(value) if value.isdigit() else None


def fake_gpus() -> list[str]:
    """The fake GPU ids Ray gave this process (none off a simulated cluster)."""
    if index() is None:
        return []
    return [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",")
            if v.strip()]


def simulated_gpu() -> bool:
    """Whether this process holds fake GPUs."""
    return bool(fake_gpus())


def gpu_process() -> bool:
    """The GPU branch for placement and groups: real CUDA here, or fake GPUs."""
    if simulated_gpu():
        return True
    torch = sys.modules.get("torch")
    return bool(torch is not None and torch.cuda.is_available())


def believed_device(local_rank: int = 0) -> str:
    """The device this process would compute on (`cuda:<i>` as torch numbers the visible
    GPUs, `cpu` without any)."""
    return f"cuda:{local_rank}" if gpu_process() else "cpu"


def physical_device(local_rank: int = 0) -> str:
    """The fake GPU as Ray numbers it on its node (what two ranks must not share)."""
    gpus = fake_gpus()
    return f"cuda:{gpus[min(local_rank, len(gpus) - 1)]}" if gpus else "cpu"


def place(tensor: Any, local_rank: int = 0) -> Any:
    """`tensor` (on the CPU) marked as living on this process's fake GPU; unchanged off a
    simulated node."""
    if simulated_gpu():
        setattr(tensor, MARK, physical_device(local_rank))
    return tensor


def device_of(tensor: Any) -> Any:
    """The device a tensor stands for: the fake GPU it was placed on, else its own."""
    import torch

    marked = getattr(tensor, MARK, None)
    return torch.device(marked) if marked else tensor.device
