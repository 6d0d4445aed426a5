"""A flow that reports where its tasks ran: a plain task, then a worker group's task."""

from __future__ import annotations

import os

from alignflow.flows.engine import flow, task
from alignflow.flows.ray.workers import worker_group


class Nothing:
    def restore(self, store, folder) -> None:
        pass


@task
def plain_pid() -> int:
    return os.getpid()


@task(worker="w")
def worker_pid(obj: Nothing) -> int:
    return os.getpid()


@flow
def pids(cfg: dict) -> list:
    first = plain_pid()
    worker_group("w", Nothing, num_cpus=0)
    return [first, worker_pid()]
