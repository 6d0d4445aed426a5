"""A process that joined a group (a world of one here; torchrun's ranks alike) leaves it at
exit while Python is whole: a rank ending with gloo's work threads alive aborted in CI
("terminate called without an active exception", SIGABRT)."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import torch, torch.distributed as dist
from alignflow.tasks.distributed import group
real = dist.destroy_process_group
def destroy(*a, **k):
    print("left the group", flush=True)
    return real(*a, **k)
dist.destroy_process_group = destroy
group.ensure_group("gloo")
x = torch.ones(3)
dist.all_reduce(x)
print("in a group of", dist.get_world_size(), flush=True)
"""


def test_a_process_in_a_group_leaves_it_at_exit():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["in a group of 1", "left the group"]
