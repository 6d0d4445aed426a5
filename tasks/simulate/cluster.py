"""A simulated GPU cluster: N Ray nodes on this machine, each advertising G fake GPUs.

The head is simulated node 0, workers are nodes 1..N-1 (Ray's own multi-node test harness,
`ray.cluster_utils`, starts their raylets here). Each node carries its index as a label
(`alignflow.simulated-node`, so `Cluster.current()` knows the cluster is simulated) and in
its processes' environment (`node.py`), with the cluster's folder for sightings and strict
process groups switched on (`ALIGNFLOW_STRICT_GROUPS`: NCCL's refusals on gloo).

Nodes listen on this machine's address (Ray refuses loopback for a second node), so, as
`infra/local_cluster.sh` does, the cluster takes a token of its own (Ray's token auth, a
0600 file in its folder). Ray reads the auth mode once per process: a process that joined a
simulated cluster keeps token auth for its life (the CLI runs one cluster per process; the
tests drive theirs from a child process). CPUs are logical: each node advertises enough for
the plan's reservations, whatever this machine has; the work shares its cores.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from alignflow.errors import ConfigError, FlowError
from alignflow.tasks.simulate import node, node_health, sightings

STRICT_GROUPS_ENV = "ALIGNFLOW_STRICT_GROUPS"  # tasks/distributed/strict.py's switch
OBJECT_STORE_BYTES = 160 << 20  # per node: tiny models, bucketed weights
_LEAN = {"include_dashboard": False, "include_log_monitor": False}
_HEAD_ONLY = {"no_monitor": True}
_NICENESS_ENV = "RAY_worker_niceness"  # Ray's own name (ray_constants.RAY_WORKER_NICENESS)
_NO_PRESTART = {"enable_worker_prestart": False, "prestart_worker_first_driver": False}


def default_cpus(gpus_per_node: int) -> float:
    """Logical CPUs a simulated node advertises: room for a worker per GPU, an engine per
    GPU and the hosts that hold no GPU (Ray CPUs are reservations, not cores)."""
    return float(max(2 * gpus_per_node + 4, 8))


class SimulatedCluster:
    """`nodes` × `gpus_per_node` fake GPUs on this machine; `start()`, then `connect()` from
    the driver; `sightings()` are what its processes saw; `stop()` ends every process it
    started (and nothing else). The head notices a lost node as fast as `health` says
    (`node_health.ENV`, alignflow's choice for every head; the bench passes Ray's own)."""

    def __init__(self, nodes: int, gpus_per_node: int, cpus_per_node: float | None = None,
                 *, folder: str | None = None,
                 health: Mapping[str, str] = node_health.ENV) -> None:
        if nodes < 1 or gpus_per_node < 1:
            raise ConfigError(f"--simulate-cluster {nodes}x{gpus_per_node}: expected at least "
                              "1 node of 1 or more GPUs")
        self.nodes, self.gpus_per_node = nodes, gpus_per_node
        self.cpus_per_node = cpus_per_node or default_cpus(gpus_per_node)
        self.folder = folder or tempfile.mkdtemp(prefix="afsim-", dir="/tmp")  # short: sockets
        self.health = health
        self._ray: Any = None  # ray.cluster_utils.Cluster

    @property
    def address(self) -> str:
        assert self._ray is not None, "start() first"
        return self._ray.address

    def start(self) -> SimulatedCluster:
        """Start every node (the head first) and wait until each has joined."""
        auth = self._auth()
        if "ray._raylet" in sys.modules and os.environ.get("RAY_AUTH_MODE") != "token":
            raise FlowError("a simulated cluster must start before this process loads Ray "
                            "(Ray reads its token-auth mode once per process); expected a "
                            "fresh process, as `alignflow run ... --simulate-cluster` is")
        os.environ.update(auth)  # before Ray is loaded: it reads the mode once
        from ray import cluster_utils

        with _no_address_file():
            self._ray = cluster_utils.Cluster(
                initialize_head=True, head_node_args=self._node_args(0, head=True))
            for i in range(1, self.nodes):
                self._ray.add_node(**self._node_args(i))
            self._ray.wait_for_nodes(timeout=120)
        return self

    def _auth(self) -> dict[str, str]:
        token = Path(self.folder, "auth_token")
        if not token.exists():
            fd = os.open(token, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w") as out:
                out.write(secrets.token_hex(32))
        return {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN_PATH": str(token)}

    def _node_args(self, index: int, *, head: bool = False) -> dict:
        env = {node.ENV_NODE: str(index), node.ENV_DIR: self.folder, STRICT_GROUPS_ENV: "1"}
        args = dict(num_cpus=self.cpus_per_node, num_gpus=self.gpus_per_node,
                    labels={node.LABEL: str(index)}, env_vars=env,
                    object_store_memory=OBJECT_STORE_BYTES, **_LEAN)
        if head:
            config = {**_NO_PRESTART, **node_health.system_config(self.health),
                      "worker_niceness": _worker_niceness()}
            args.update(temp_dir=self.folder, _system_config=config, **_HEAD_ONLY)
        return args

    def connect(self) -> None:
        """Join the cluster as its driver (this process stays off the simulated nodes)."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        ray.init(address=self.address, logging_level=logging.ERROR, log_to_driver=False)

    def sightings(self, *, clear: bool = False) -> list[dict]:
        return sightings.collect(self.folder, clear=clear)

    def stop(self) -> None:
        """Disconnect, end the nodes' processes, remove the folder."""
        import ray

        if ray.is_initialized():
            ray.shutdown()
        if self._ray is not None:
            self._ray.shutdown()
            self._ray = None
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> SimulatedCluster:
        return self.start()

    def __exit__(self, *_exc: object) -> None:
        self.stop()


def _worker_niceness() -> int:
    """Workers at the driver's priority, not Ray's default 15 (or the user's
    RAY_worker_niceness): flows/ray/niceness.py says why and checks the value."""
    return int(os.environ.get(_NICENESS_ENV) or 0)


@contextlib.contextmanager
def _no_address_file() -> Iterator[None]:
    """Ray's harness writes the head's address to /tmp/ray/ray_current_cluster, where any
    `ray.init()` on this machine would find and join it: not for a simulated cluster."""
    from ray._private import utils

    write = utils.write_ray_address
    utils.write_ray_address = lambda *_a, **_k: None
    try:
        yield
    finally:
        utils.write_ray_address = write
