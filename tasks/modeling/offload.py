"""Park an idle model's weights in a safetensors temp file and bring them back bitwise.

Reference and reward models sit idle during generate and learn; offloading frees their
memory between uses (`placement.offload_idle`). No pickle: parameters and buffers go to
safetensors, and the module is moved to the meta device meanwhile.
"""

from __future__ import annotations

import os
import tempfile

import torch
from safetensors.torch import load_file, save_file
from torch import nn


def offload(module: nn.Module, prefix: str = "alignflow-offload-") -> str:
    """Writes the module's parameters and buffers to a temp file, moves it to meta; the path."""
    tensors = {n: t.detach().contiguous() for n, t in module.named_parameters()}
    tensors |= {n: b.detach().contiguous() for n, b in module.named_buffers()}
    fd, path = tempfile.mkstemp(prefix=prefix, suffix=".safetensors")
    os.close(fd)
    save_file(tensors, path)
    module.to("meta")
    return path


def reload(module: nn.Module, path: str, device: torch.device | str = "cpu") -> None:
    """Restores what `offload` wrote (bitwise) onto `device` and deletes the temp file.

    Moving to meta and back unties shared weights (e.g. a tied LM head), which would leave
    the copy uninitialised: re-tie first, then insist that every tensor was restored.
    """
    module.to_empty(device=device)
    if hasattr(module, "tie_weights"):
        module.tie_weights()
    params = dict(module.named_parameters())
    targets = params | dict(module.named_buffers())
    saved = load_file(path)
    missing = sorted(set(targets) - set(saved))
    if missing:
        raise RuntimeError(f"reload from {path}: no saved values for {missing[:3]}; "
                           "weights tied after offload?")
    with torch.no_grad():
        for name, value in saved.items():
            targets[name].copy_(value)
    os.unlink(path)
