"""A task that imports torch itself is seeded like one whose process already had torch."""

from __future__ import annotations

import json
import subprocess
import sys

CHILD = r'''
import json, sys
from alignflow.flows import wrapper

def body():
    import torch
    return torch.rand(3).tolist()

call = {"store": None, "run_id": "r", "task_key": "k", "seed": 1234, "attempt": 1,
        "fn": body, "args": (), "kwargs": {}}
before = "torch" in sys.modules
lazy = wrapper.execute(call)["output"]
eager = wrapper.execute(call)["output"]  # torch imported now: seeded up front
hooks = [type(f).__name__ for f in sys.meta_path if "Seed" in type(f).__name__]
print(json.dumps([before, lazy, eager, hooks]))
'''


def test_torch_imported_by_the_task_gets_the_task_seed():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         check=True).stdout
    before, lazy, eager, hooks = json.loads(out.splitlines()[-1])
    import torch

    torch.manual_seed(1234)
    expected = torch.rand(3).tolist()
    assert before is False  # the wrapper itself does not import torch
    assert lazy == eager == expected
    assert hooks == []  # the import hook is gone after the attempt
