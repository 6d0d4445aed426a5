"""`alignflow run FLOW ... --cluster NxG` (with `--dry-run`: the plan for a cluster this
machine is not), `--address ADDR` (the plan for a running cluster's real resources, checked
before the run starts, also when this machine has no GPU) and `--simulate-cluster NxG` (the whole run here, on a local Ray cluster of N
nodes advertising G fake GPUs each: `tasks/simulate/`). `--gpu-memory SIZE` (with
`--dry-run`): each GPU's memory, which the plan's per-GPU peaks are checked against
(`tasks/plan/memory/`; not given: 80 GiB assumed and said).

A simulated run is marked in run.json: `simulated.cluster` from its plan (`flows/control/planning.py`)
and, when the run ends (or fails), `simulated.actors`: what each of its processes saw (node,
`CUDA_VISIBLE_DEVICES`, device, actor, rank).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError
from alignflow.flows.cli.outputs import run_id_for
from alignflow.flows.control import api
from alignflow.flows.journal import identity, runs
from alignflow.tasks.plan.cluster import Cluster, parse_size
from alignflow.tasks.simulate.cluster import SimulatedCluster, default_cpus

if TYPE_CHECKING:
    from alignflow.flows.cli.request import RunRequest
    from alignflow.flows.cli.run_config import CheckedRun

T = TypeVar("T")


def add_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--cluster", metavar="NxG[:C]",
                        help="with --dry-run: plan for N nodes of G GPUs (and C CPUs) each "
                             "instead of this machine, and refuse a plan that does not fit")
    parser.add_argument("--gpu-memory", metavar="SIZE",
                        help="with --dry-run: each GPU's memory (80GB, 141GB, 24GB, ...) the "
                             "plan's per-GPU peaks are checked against (default: 80GB assumed)")
    parser.add_argument("--simulate-cluster", metavar="NxG",
                        help="run here on a simulated cluster: N local Ray nodes advertising "
                             "G fake GPUs each (real placement, ranks and NCCL-strict groups; "
                             "model math on the CPU)")


def target(known: RunRequest) -> Cluster | None:
    """The cluster the run is planned for (`_target`), with `--gpu-memory` per GPU."""
    size = known.gpu_memory
    cluster = _target(known)
    if size is None:
        return cluster
    if not known.dry_run:
        raise ConfigError(f"--gpu-memory {size}: checks a plan's per-GPU peaks; use it with "
                          "--dry-run")
    return dataclasses.replace(cluster or Cluster.local(), gpu_memory=parse_size(size))


def _target(known: RunRequest) -> Cluster | None:
    """The cluster the run is planned for: `--cluster`, `--simulate-cluster`, a dry run's
    `--address` (joined to read its resources), or None (this machine)."""
    if known.cluster and known.simulate_cluster:
        raise ConfigError("--cluster and --simulate-cluster: give one (--simulate-cluster "
                          "plans for the cluster it simulates)")
    if known.cluster:
        if not known.dry_run:
            raise ConfigError(f"--cluster {known.cluster} plans for a cluster this machine is "
                              "not: use it with --dry-run, or rehearse the run here with "
                              f"--simulate-cluster {known.cluster}")
        return Cluster.parse(known.cluster)
    if known.simulate_cluster:
        if known.address or known.detach:
            raise ConfigError("--simulate-cluster starts its own Ray cluster for the run in "
                              "this process; drop --address and --detach")
        found = Cluster.parse(known.simulate_cluster, simulated=True)
        return Cluster(nodes=found.nodes, gpus_per_node=found.gpus_per_node, simulated=True,
                       cpus_per_node=found.cpus_per_node or default_cpus(found.gpus_per_node))
    if known.address:  # the run's plan is checked against the cluster it will run on
        from alignflow.flows.ray.connect import ensure_ray

        ensure_ray(known.address)  # says "running on Ray cluster at ADDRESS" once
        return Cluster.current()
    return None


def run_simulated(request: RunRequest, checked: CheckedRun,
                  start: Callable[[RunRequest], T]) -> T:
    """`start(request)` (the run) on a simulated cluster started for it and stopped after
    it, with the cluster's address and the run's id settled in the request; what each
    process saw is recorded in run.json, also when the run fails."""
    cluster = request.planned_cluster
    assert cluster is not None  # `target` plans a simulated run for its cluster
    flow = os.path.basename(request.flow).split(":")[-1].removesuffix(".py")
    run_id = run_id_for(flow, checked, request.run_id) or identity.new_run_id(flow)
    sim = SimulatedCluster(cluster.nodes, cluster.gpus_per_node, cluster.cpus_per_node)
    print(f"alignflow: starting a simulated cluster: {cluster.describe()}", file=sys.stderr,
          flush=True)
    with sim:
        sim.connect()
        there = dataclasses.replace(request, run_id=run_id, address=sim.address,
                                    executor="ray")
        try:
            return start(there)
        finally:
            record(api.open_store(request.store), run_id, sim.sightings(clear=True))


def record(store: Store, run_id: str, seen: list[dict]) -> None:
    """`seen` (sightings) into run.json's `simulated` record, once the run exists."""
    if not store.exists(runs.run_json(run_id)):
        return
    meta = runs.read_run(store, run_id)
    simulated = dict(meta.get("simulated") or {})
    simulated["actors"] = [*simulated.get("actors", []), *seen]
    runs.update_run(store, run_id, simulated=simulated)


def simulated(meta: dict) -> str:
    """What `alignflow ls` / `status` add to a simulated run's status: ` (simulated 2x4)`."""
    record = meta.get("simulated")
    return f" (simulated {record['cluster']})" if isinstance(record, dict) and \
        record.get("cluster") else ""

