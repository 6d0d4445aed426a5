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


def reload(module: nn.Module, path: str) -> None:
    """Restores what `offload` wrote (bitwise) onto the CPU and deletes the temp file."""
    module.to_empty(device="cpu")
    params = dict(module.named_parameters())
    with torch.no_grad():
        for name, value in load_file(path).items():
            (params[name] if name in params else module.get_buffer(name)).copy_(value)
    os.unlink(path)
