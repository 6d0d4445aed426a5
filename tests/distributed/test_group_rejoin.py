"""A process that leaves its group and joins another (the pytest process; a host that re-forms
its group) gets DeepSpeed engines on the new group: DeepSpeed's cached clone of the old world
went with it (before: "Group ... is not registered" at the next engine's first broadcast)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from alignflow.tasks.distributed.group import TORCHRUN_VARS

SCRIPT = """
import deepspeed, torch.distributed as dist
from deepspeed.utils import groups
from alignflow.tasks.distributed import group
for round in range(2):
    group.ensure_group("gloo")
    deepspeed.init_distributed(dist_backend="gloo")
    print(round, dist.get_global_rank(groups._clone_world_group(), 0), flush=True)
    group.leave()
"""


def test_deepspeed_follows_the_process_into_its_next_group():
    pytest.importorskip("deepspeed")
    env = {k: v for k, v in os.environ.items() if k not in (*TORCHRUN_VARS, "LOCAL_RANK")}
    done = subprocess.run([sys.executable, "-W", "ignore", "-c", SCRIPT], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-2:] == ["0 0", "1 0"]
