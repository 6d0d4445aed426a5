"""Where a host's models live: CUDA when placement gave the host GPUs, else the CPU.

`host_device` decides a rank's GPU once, and makes it CUDA's current device (what NCCL,
DeepSpeed, vLLM and every `torch.cuda` call without an index use): a Ray actor's first
visible GPU (Ray narrows `CUDA_VISIBLE_DEVICES` to the actor's GPUs, a shared fraction
too), torchrun's or a joined group's `LOCAL_RANK`, or — inline, every host in the driver —
the GPU the plan gives the host (`HostPlan.first_gpu`), the current device left alone.
Inputs built on the CPU (token ids from the store) move to the model's device at the
forward call (`to_model`). Importing this module needs no CUDA.

On a simulated cluster (`tasks/simulate/`) Ray hands out fake GPUs: a host given one is
*on a GPU* for everything that places, reserves, sleeps or joins (`on_gpu`, the NCCL
stand-in), and keeps its tensors on the CPU (`host_device`: no CUDA device is set), where
the math runs. A tensor put on the device for a collective goes through `place`, which
marks it as on the fake GPU so the strict group judges it as NCCL would. Each host's
device is recorded as a sighting.
"""

from __future__ import annotations

import os
import sys

import torch
from torch import nn

from alignflow.errors import ConfigError
from alignflow.tasks.modeling.attention import ATTENTIONS
from alignflow.tasks.modeling.attention import Attention as Attention  # re-exported
from alignflow.tasks.simulate import node, sightings


def host_device(num_gpus: float, *, first_gpu: int = 0, kind: str = "host") -> torch.device:
    """The device of a host given `num_gpus` by placement (fractions share one GPU);
    `first_gpu`: the plan's GPU for the host when every host shares this process. A fake
    GPU keeps the tensors on the CPU; `kind` names the host in its sighting."""
    if num_gpus <= 0:
        sightings.record(kind, "cpu")
        return torch.device("cpu")
    if node.simulated_gpu():
        sightings.record(kind, node.believed_device())
        return torch.device("cpu")
    if not torch.cuda.is_available():
        visible = os.environ.get("CUDA_VISIBLE_DEVICES", "unset")
        raise ConfigError(f"placement gave this host {num_gpus:g} GPU(s) but torch sees none "
                          f"(CUDA_VISIBLE_DEVICES={visible}); expected a CUDA build of torch "
                          "on a GPU node, or GPU counts of 0 to run on CPU")
    index, owned = rank_gpu(first_gpu)
    index %= torch.cuda.device_count()
    if owned:
        torch.cuda.set_device(index)
    return torch.device("cuda", index)


def rank_gpu(first_gpu: int = 0) -> tuple[int, bool]:
    """(this rank's CUDA index, whether the process is that one rank and sets it current)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized() and ray.get_runtime_context().get_actor_id():
        if os.environ.get("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES"):
            return int(ray.get_gpu_ids()[0]), True  # every GPU visible: the one Ray assigned
        return 0, True
    if "LOCAL_RANK" in os.environ:
        return int(os.environ["LOCAL_RANK"]), True
    return first_gpu, False


def on_gpu(num_gpus: float) -> bool:
    """Whether a host given `num_gpus` counts as on a GPU (real or fake): the branch for
    what it reserves, frees between steps and joins, never for where tensors go."""
    return num_gpus > 0


def place(tensor: torch.Tensor, device: torch.device | str) -> torch.Tensor:
    """`tensor` on `device` for a collective; on a fake GPU (`device` is then the CPU) it is
    marked as on the GPU, as the strict group stands for NCCL."""
    moved = tensor.to(device)
    return node.place(moved) if torch.device(device).type == "cpu" else moved


def rank_device() -> torch.device:
    """The device a process's collectives carry tensors on: its current GPU, the CPU on a
    fake one or without any (mark them with `place`)."""
    if torch.cuda.is_available() and not node.simulated_gpu():
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def model_device(model: nn.Module) -> torch.device:
    param = next(model.parameters(), None)
    return param.device if param is not None else torch.device("cpu")


def to_model(model: nn.Module, *tensors: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """`tensors` on `model`'s device (no copy when they are there already)."""
    device = model_device(model)
    return tuple(t.to(device, non_blocking=True) for t in tensors)


def check_attention(name: str, device: torch.device) -> str:
    """`name` if this process can use it: flash_attention_2 needs CUDA and `flash_attn`."""
    if name not in ATTENTIONS:
        raise ConfigError(f"ds.attn_implementation={name!r}: expected one of {ATTENTIONS}")
    if name != "flash_attention_2":
        return name
    if device.type != "cuda":
        raise ConfigError("ds.attn_implementation=flash_attention_2 needs a GPU; this host "
                          "runs on CPU (use sdpa)")
    import importlib.util

    if importlib.util.find_spec("flash_attn") is None:
        raise ConfigError("ds.attn_implementation=flash_attention_2: the flash_attn package "
                          "is not installed here; expected `pip install flash-attn` or sdpa")
    return name


def peak_gib(device: torch.device) -> float | None:
    """Peak memory allocated on `device` since the last `reset_peak`, in GiB (CUDA only)."""
    if device.type != "cuda":
        return None
    return torch.cuda.max_memory_allocated(device) / (1 << 30)


def reset_peak(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
