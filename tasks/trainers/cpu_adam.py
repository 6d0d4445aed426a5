"""DeepSpeedCPUAdam (`ds.adam_offload`): AdamW on the CPU for ZeRO's offloaded optimizer.

Its C++ op is compiled just in time on first use — about a minute, silently — unless
DeepSpeed was installed with it prebuilt or an earlier run left it in the extensions cache
(`$TORCH_EXTENSIONS_DIR`, else torch's default under `~/.cache/torch_extensions`). A run
that seems to hang there says why first, in one line (`build_note`).
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Sequence

import torch

OP = "cpu_adam"  # DeepSpeed's op name (CPUAdamBuilder.NAME)


def extensions_dir() -> str:
    """Where torch's JIT builds DeepSpeed's op (torch's own rule; nothing is created)."""
    root = os.environ.get("TORCH_EXTENSIONS_DIR")
    if root is None:
        from torch.utils.cpp_extension import get_default_build_root

        kind = f"cu{torch.version.cuda.replace('.', '')}" if torch.version.cuda else "cpu"
        version = f"py{sys.version_info.major}{sys.version_info.minor}"
        root = os.path.join(get_default_build_root(),
                            f"{version}{getattr(sys, 'abiflags', '')}_{kind}")
    return os.path.join(root, OP)


def build_note() -> str | None:
    """The line to say before DeepSpeedCPUAdam is built, or None when nothing is compiled
    (the op is installed with DeepSpeed, or already in the cache)."""
    from deepspeed.git_version_info import installed_ops

    where = extensions_dir()
    if installed_ops.get(OP, False) or glob.glob(os.path.join(where, f"{OP}*.so")):
        return None
    set_by = "TORCH_EXTENSIONS_DIR" if "TORCH_EXTENSIONS_DIR" in os.environ else \
        "torch's default; set TORCH_EXTENSIONS_DIR to keep it elsewhere"
    return (f"ds.adam_offload: building DeepSpeedCPUAdam's C++ op now, in {where} ({set_by}); "
            "this takes about a minute, once")


def cpu_adam(groups: Sequence[dict], **kw) -> torch.optim.Optimizer:
    """DeepSpeedCPUAdam in AdamW mode over `groups`, its build announced first."""
    note = build_note()
    if note:
        print(note, file=sys.stderr, flush=True)
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    return DeepSpeedCPUAdam(groups, adamw_mode=True, **kw)
