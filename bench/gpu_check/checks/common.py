"""What every node check shares: the result line the runner reads, CUDA gating, the tiny model.

A check is a module run as `python -P -m bench.gpu_check.checks.<name> [arg]` in its own
process (a crash, a hang or a CUDA fault ends only that check). Its last stdout line
tagged `TAG` carries its status and key figures as JSON; a failure adds the last lines of
its traceback. A GPU check on a machine without CUDA reports `needs-cuda` and exits 0.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

TAG = "@@gpu-check "
TAIL_LINES = 12


class NeedsCuda(Exception):
    """This check needs a CUDA device and torch sees none."""


class CheckFailed(AssertionError):
    """The check ran and the code under test misbehaved; `figures` say how."""

    def __init__(self, message: str, figures: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.figures = figures or {}


def cuda():
    """torch, once it is known to see a CUDA device (else `NeedsCuda`)."""
    import torch

    if not torch.cuda.is_available():
        raise NeedsCuda(f"torch {torch.__version__} sees no CUDA device "
                        f"(torch.version.cuda={torch.version.cuda})")
    return torch


def tiny_model_dir() -> str:
    """The tiny offline Llama, built (once) by the project's own recipe."""
    from alignflow.tasks.zoo.registry import prepare_model

    return str(prepare_model("tiny-llama"))


def out_dir() -> Path:
    """Where a check may write (the runner's output folder)."""
    path = Path(os.environ.get("GPU_CHECK_OUT", "dist/gpu-check"))
    path.mkdir(parents=True, exist_ok=True)
    return path


def traceback_tail(exc: BaseException, lines: int = TAIL_LINES) -> list[str]:
    text = "".join(traceback.format_exception(exc)).rstrip().splitlines()
    return text[-lines:]


def emit(status: str, figures: dict[str, Any], error: list[str] | None = None) -> None:
    line = {"status": status, "figures": figures, "error": error}
    print(TAG + json.dumps(line, default=str), flush=True)


def run(check: Callable[[list[str]], dict[str, Any]]) -> None:
    """Runs `check(argv)` and reports; exits 0 whatever happened (the line says it)."""
    start = time.perf_counter()
    try:
        figures = check(sys.argv[1:])
        emit("pass", {**figures, "check_seconds": round(time.perf_counter() - start, 2)})
    except NeedsCuda as exc:
        emit("needs-cuda", {"reason": str(exc)})
    except CheckFailed as exc:
        traceback.print_exc()
        cause = exc.__cause__  # the code under test's own traceback, when it raised
        tail = traceback_tail(cause) + [f"CheckFailed: {exc}"] if cause else traceback_tail(exc)
        emit("fail", exc.figures, tail)
    except BaseException as exc:  # a check reports every failure, its own bugs too
        traceback.print_exc()
        emit("fail", {}, traceback_tail(exc))
    sys.exit(0)
