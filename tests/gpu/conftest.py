"""GPU tests: skipped on a machine without CUDA (every test here needs one); each test
skips below the GPUs its run's plan reserves (`_needs_gpus`), so one GPU runs what fits.

Run on a GPU machine with `.venv/bin/python -m pytest tests/gpu` (HF engine) and, for the
vLLM tests, with the official `vllm` wheel installed in that venv.
"""

from __future__ import annotations

import pytest
import torch


def pytest_collection_modifyitems(config, items) -> None:
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs CUDA (tests/gpu runs on a GPU machine)")
    for item in items:
        if "tests/gpu/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)
