"""`alignflow run`'s command line as one frozen value, built once from the parsed arguments
and passed on (to the config check, a detached or supervised child, a simulated cluster,
the run itself). What is settled later (the executor `auto` picks, a simulated cluster's
address and run id) makes a new request (`dataclasses.replace`), so no callback writes
state onto the argparse namespace."""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from alignflow.tasks.plan.cluster import Cluster


@dataclass(frozen=True)
class RunRequest:
    """What the person asked for: the flow, its config sources and where and how to run."""

    flow: str
    config: str | None = None  # --config FILE
    sets: tuple[str, ...] = ()  # --set KEY=VALUE, in order
    flags: tuple[str, ...] = ()  # the flow's own flags (OpenRLHF's), for the config loader
    run_id: str | None = None
    seed: int | None = None  # None: the command's default (`api.DEFAULT_SEED`)
    executor: str = "auto"  # auto until the run's plan settles it
    executor_why: str = ""  # why `auto` picked it
    store: str | None = None
    address: str | None = None
    detach: bool = False
    dry_run: bool = False
    supervise: bool = False
    ignore_hardware: bool = False
    cluster: str | None = None  # --cluster NxG (a dry run's)
    gpu_memory: str | None = None
    simulate_cluster: str | None = None
    max_restarts: int | None = None
    from_shell: bool = False  # a person at a shell (says hello at once)
    planned_cluster: Cluster | None = None  # the cluster the run is planned for

    @classmethod
    def of(cls, known: argparse.Namespace, flags: list[str]) -> RunRequest:
        """The request `run_parser` parsed into `known`, with the flags it left."""
        return cls(flow=known.flow, config=known.config, sets=tuple(known.sets),
                   flags=tuple(flags), run_id=known.run_id, seed=known.seed,
                   executor=known.executor, store=known.store, address=known.address,
                   detach=known.detach, dry_run=known.dry_run, supervise=known.supervise,
                   ignore_hardware=known.ignore_hardware, cluster=known.cluster,
                   gpu_memory=getattr(known, "gpu_memory", None),
                   simulate_cluster=known.simulate_cluster,
                   max_restarts=getattr(known, "max_restarts", None),
                   from_shell=bool(getattr(known, "from_shell", False)))
