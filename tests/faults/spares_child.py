"""Child process of test_warm_spares.py: a supervised driver joins its own Ray with the
spares' runtime environment (a job's runtime environment is fixed when it joins)."""

from __future__ import annotations

import json
import os
import sys
import time

import ray

from alignflow.flows.ray import adopt, spares
from alignflow.flows.ray.groups import RayWorkerGroup
from alignflow.tasks.distributed.ray_group import GroupMember

# two ranks on one node, each with a (fake) GPU of its bundle, as on a GPU node
OPTIONS = {"num_nodes": 1, "workers_per_node": 2, "num_cpus": 0.1, "num_gpus": 1}


class Member(GroupMember):
    def group_on_gpu(self) -> bool:
        return False


def idle_spares() -> list[int]:
    """Pids of this job's never-used workers on the (only) node."""
    return sorted(spares._idle_workers(next(iter(spares._raylets().values()))))


def imported() -> set[int]:
    """Pids of the workers whose imports ahead are done (a spare is idle from its start, and
    imports in the machine's idle time: `flows/ray/warm_imports.py`)."""
    with open(os.environ["ALIGNFLOW_TIMELINE"]) as fh:
        marks = [json.loads(line) for line in fh]
    return {m["pid"] for m in marks if m["event"] == "spare imported"}


def wait_for_spares(count: int, timeout: float = 90.0) -> list[int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        pids = [pid for pid in idle_spares() if pid in imported()]
        if len(pids) >= count:
            return pids
        time.sleep(0.5)
    raise SystemExit(f"no {count} idle spares after {timeout}s: {idle_spares()}")


def main() -> None:
    os.environ[adopt.SUPERVISED_ENV] = "1"
    ray.init(num_cpus=4, num_gpus=2, include_dashboard=False, runtime_env=spares.runtime_env(()),
             _system_config={"enable_worker_prestart": False,
                             "prestart_worker_first_driver": False})
    group = RayWorkerGroup("actor", Member, OPTIONS, f"t{os.getpid()}").start()
    first = [ray.get(a.pid.remote()) for a in group.actors]
    spare_pids = wait_for_spares(2)
    group.kill()  # a rank died: the group is formed again
    again = RayWorkerGroup("actor", Member, OPTIONS, group.run_id).start()
    second = [ray.get(a.pid.remote()) for a in again.actors]
    threads = [ray.get(a.call.remote(
        {"store": None, "run_id": "r", "task_key": "threads", "seed": 0, "attempt": 1,
         "fn": threads_now, "args": (), "kwargs": {}, "worker": True, "rank": r,
         "world_size": 2}))["output"] for r, a in enumerate(again.actors)]
    json.dump({"threads": threads, "first": first, "spares": spare_pids, "second": second,
               "refill": wait_for_spares(2)}, sys.stdout)


def threads_now(member: Member) -> list:
    """torch's threads against what Ray assigned the rank (OMP_NUM_THREADS), and the GPU
    Ray gave it (set when the actor was created in the spare, not when the spare started)."""
    import torch

    return [torch.get_num_threads(), os.environ.get("OMP_NUM_THREADS", ""),
            os.environ.get("CUDA_VISIBLE_DEVICES", "")]


if __name__ == "__main__":
    main()
