"""A process that joined a group (a world of one here; torchrun's ranks alike) leaves it at
exit while Python is whole: a rank ending with gloo's work threads alive aborted in CI
("terminate called without an active exception", SIGABRT)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from alignflow.tasks.distributed.group import TORCHRUN_VARS

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


def _outside_any_group() -> dict[str, str]:
    """This environment without the rank variables (a group an earlier test joined
    in-process may have left them): a child is not a torchrun rank."""
    return {k: v for k, v in os.environ.items() if k not in (*TORCHRUN_VARS, "LOCAL_RANK")}


def test_a_process_in_a_group_leaves_it_at_exit():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=120, env=_outside_any_group())
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines() == ["in a group of 1", "left the group"]


def test_leaving_a_group_puts_back_the_rank_variables_joining_set(monkeypatch):
    """`join` sets RANK, WORLD_SIZE, MASTER_* for the libraries that read them; after
    `leave` the process (and what it starts) no longer looks like a torchrun rank."""
    from alignflow.tasks.distributed import group

    group.leave()  # an earlier test in this process may have left it in a group
    for key in (*TORCHRUN_VARS, "LOCAL_RANK"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("MASTER_ADDR", "10.0.0.9")
    group.join(group.GroupSpec(rank=0, world_size=1, master_addr="127.0.0.1",
                               master_port=group.free_port(), backend="gloo"))
    assert os.environ["WORLD_SIZE"] == "1" and os.environ["MASTER_ADDR"] == "127.0.0.1"
    group.leave()
    assert [k for k in (*TORCHRUN_VARS, "LOCAL_RANK") if k in os.environ] == ["MASTER_ADDR"]
    assert os.environ["MASTER_ADDR"] == "10.0.0.9"


BUSY_AT_EXIT = """
import json, sys, time, torch, torch.distributed as dist
from alignflow.tasks.distributed import group, settle
group.ensure_group("gloo")
class SlowTeardown:  # the interpreter's teardown outlasts the queued collectives
    def __del__(self, sleep=time.sleep):
        sleep(1.5)
HELD = (dist.group.WORLD, SlowTeardown())  # the group held to the end, as ZeRO-3's params do
for _ in range(8):  # queued on gloo's two workers; Python drops each output at once
    dist.all_gather_into_tensor(torch.empty(2 ** 23), torch.ones(2 ** 23), async_op=True)
if sys.argv[1] == "probe":
    busy = settle.workers_busy()
    print(json.dumps([bool(busy), settle.settle(), settle.workers_busy()]))
"""


def _busy_at_exit(mode: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-W", "ignore", "-c", BUSY_AT_EXIT, mode],
                          capture_output=True, text=True, timeout=120, env=_outside_any_group())


def test_settle_waits_until_no_gloo_worker_can_need_the_gil():
    done = _busy_at_exit("probe")
    assert done.returncode == 0, done.stderr[-2000:]
    busy_before, settled, busy_after = json.loads(done.stdout.splitlines()[-1])
    assert busy_before and settled and busy_after == []


def test_a_process_whose_collectives_end_in_its_teardown_exits_cleanly():
    """Collectives still in gloo's hands when the script ends: without `settle` at exit the
    process aborted in 3 of 5 runs here (SIGABRT: a worker asked for the GIL while the
    interpreter was being torn down); with it, none."""
    for _ in range(2):
        done = _busy_at_exit("exit")
        assert done.returncode == 0, done.stderr[-2000:]
        assert "terminate called" not in done.stderr
