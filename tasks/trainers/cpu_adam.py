"""DeepSpeedCPUAdam (`ds.adam_offload`): AdamW on the CPU for ZeRO's offloaded optimizer.

Its C++ op is compiled just in time on first use — about a minute, silently — unless
DeepSpeed was installed with it prebuilt or an earlier run left it in the extensions cache
(`$TORCH_EXTENSIONS_DIR`, else torch's default under `~/.cache/torch_extensions`). A run
that seems to hang there says why first, in one line (`build_note`).

torch builds under a lock file in that folder (its `FileBaton`, `<dir>/lock`) and waits
for it without end or word. A lock left by a process killed mid-build stops every later
build that way; so a lock found before the build is waited on here instead, said in one
line, for `LOCK_WAIT_S` at most (`$ALIGNFLOW_CPU_ADAM_LOCK_S`), then refused in one line.
"""

from __future__ import annotations

import glob
import os
import sys
import time
from collections.abc import Callable, Sequence

import torch

from alignflow.errors import FlowError

OP = "cpu_adam"  # DeepSpeed's op name (CPUAdamBuilder.NAME)
LOCK_WAIT_S, LOCK_ENV = 600.0, "ALIGNFLOW_CPU_ADAM_LOCK_S"  # a build takes about a minute


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


def wait_for_lock(folder: str, *, clock: Callable[[], float] = time.monotonic,
                  pause: Callable[[float], None] = time.sleep) -> None:
    """Wait for torch's build lock in `folder` to go (said once), or `FlowError` naming it
    once `$ALIGNFLOW_CPU_ADAM_LOCK_S` (default 600 s) have passed."""
    lock = os.path.join(folder, "lock")
    if not os.path.exists(lock):
        return
    limit = float(os.environ.get(LOCK_ENV) or LOCK_WAIT_S)
    print(f"ds.adam_offload: waiting for the build lock {lock} (another process builds "
          f"DeepSpeedCPUAdam's op, or one killed mid-build left it), up to {limit:.0f} s",
          file=sys.stderr, flush=True)
    start = clock()
    while os.path.exists(lock):
        if clock() - start >= limit:
            raise FlowError(f"ds.adam_offload: DeepSpeedCPUAdam's build lock {lock} was still "
                            f"there after {limit:.0f} s; expected the build holding it to "
                            "end: if no other process is building, remove it (a killed "
                            f"build left it), or raise ${LOCK_ENV}")
        pause(1.0)


def cpu_adam(groups: Sequence[dict], **kw) -> torch.optim.Optimizer:
    """DeepSpeedCPUAdam in AdamW mode over `groups`, its build announced first (after any
    build lock another process left: `wait_for_lock`)."""
    from deepspeed.git_version_info import installed_ops

    if not installed_ops.get(OP, False):  # torch takes the lock to load a cached op too
        wait_for_lock(extensions_dir())
    note = build_note()
    if note:
        print(note, file=sys.stderr, flush=True)
    from deepspeed.ops.adam import DeepSpeedCPUAdam

    return DeepSpeedCPUAdam(groups, adamw_mode=True, **kw)
