"""Worker groups of N ranks on Ray: one actor per rank in a placement group, the ranks joined
into one collective group by the worker objects, every task of the group run on every rank.

Placement: one bundle per node (`num_nodes`), each with the CPUs/GPUs of `workers_per_node`
workers; STRICT_SPREAD puts the bundles on different nodes, PACK keeps a one-node group
together; rank r lives in bundle r // workers_per_node. Rank 0's actor picks the rendezvous
address (its node's IP and a free port) and every worker object's
`join_group(rank, world_size, master_addr, master_port)` joins the group (the engine knows
no torch: the object, e.g. a model host, forms its torch.distributed group).

A task goes to every rank with its `rank` and `world_size` in the call; its handle waits
for all ranks and returns rank 0's result, or the first failure. A rank that fails while
others wait in a collective would leave them hanging, so the whole group is killed then;
the driver rebuilds it and restores it from the newest committed checkpoint before a retry.
"""

from __future__ import annotations

import os
import socket
from typing import Any

from alignflow import detached
from alignflow.artifacts.store import Store
from alignflow.errors import FlowError
from alignflow.flows.ray import adopt, spares
from alignflow.flows.ray.worker_host import WorkerHost
from alignflow.timeline import mark

RANK_GPUS = "ALIGNFLOW_RANK_GPUS"  # every rank's GPUs, set at join (`vllm/placement.py`)


def group_size(options: dict) -> int:
    """Workers of a group: nodes × workers per node (1 for a plain worker)."""
    return int(options.get("num_nodes", 1)) * int(options.get("workers_per_node", 1))


class GroupWorker(WorkerHost):
    """The body of one rank's actor: holds `factory()` and runs the group's tasks on it
    (calls, restore, durable writes as a worker host); its models load after `join`."""

    def __init__(self, factory: Any, owner: str = "") -> None:
        mark("rank up")
        detached.own(owner)  # the engines rank 0 starts outlive it (supervised runs)
        self.obj, self.failure = factory(), None  # a failed start raises at `join`
        self.seq, self.running = 0, False  # the calls it was given
        self.last_call: dict | None = None

    def call(self, call: dict) -> dict:
        """Run the group's call numbered `group_seq` once: a number already run is a call
        delivered twice (the dead driver's, and a take-over's completion of it)."""
        seq = call.get("group_seq")
        if seq is not None:
            if seq <= self.seq:
                return {"error": None, "duplicate": seq}
            self.seq, self.last_call = seq, call
        self.running = True
        try:
            return super().call(call)
        finally:
            self.running = False

    def calls(self) -> tuple[int, bool]:
        """(number of the last call given, whether it still runs), answered on a side thread
        while a call runs (`flows/ray/adopt.settle`)."""
        return self.seq, self.running

    def call_numbered(self, seq: int) -> dict | None:
        """The call numbered `seq`, when it is the last one this rank was given."""
        return self.last_call if self.seq == seq else None

    def rendezvous(self) -> tuple[str, int, str]:
        """This node's address, a port nobody listens on (rank 0's are the group's), and
        the GPUs Ray gave this rank (comma-separated, as `CUDA_VISIBLE_DEVICES` names them)."""
        import ray

        addr = ray.util.get_node_ip_address()
        gpus = ",".join(ray.get_runtime_context().get_accelerator_ids().get("GPU", []))
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind((addr, 0))
            return addr, sock.getsockname()[1], gpus

    def join(self, rank: int, world_size: int, addr: str, port: int, gpus: str = "") -> None:
        """Join the group, then load what the object preloads (a DeepSpeed trainer needs
        the group to exist when it is built); every rank's GPUs in `$RANK_GPUS` first."""
        join = getattr(self.obj, "join_group", None)
        if join is None:
            raise FlowError(f"{type(self.obj).__name__} has no join_group(rank, world_size, "
                            "master_addr, master_port); a worker group of several needs one")
        os.environ[RANK_GPUS] = gpus
        join(rank, world_size, addr, port)
        mark(f"rank {rank} joined")
        getattr(self.obj, "preload", lambda: None)()
        mark("rank loaded")


class RayWorkerGroup:
    """N `GroupWorker` actors in one placement group, joined; `kill` ends actors and bundles."""

    def __init__(self, name: str, factory: Any, options: dict, run_id: str) -> None:
        self.name, self.factory, self.options, self.run_id = name, factory, options, run_id
        self.size = group_size(options)
        self.actors: list[Any] = []
        self.pg: Any = None
        self.seq = 0  # the number of the last call sent to the ranks

    def names(self) -> list[str]:
        return [f"alignflow:{self.run_id}:{self.name}:{rank}" for rank in range(self.size)]

    def adopt(self) -> RayWorkerGroup | None:
        """This group as a dead driver left it, when every rank answers (`flows/ray/adopt.py`)."""
        found = adopt.adopt_ranks(self.names(), f"alignflow:{self.run_id}:{self.name}")
        if found is None:
            return None
        self.actors, self.pg, self.seq = found
        self._keep_spares()
        return self

    def start(self) -> RayWorkerGroup:
        import ray

        if adopt.supervised():  # a dead driver's ranks and bundles, not adopted: gone first
            detached.discard(self.names())
            detached.remove_pg(f"alignflow:{self.run_id}:{self.name}")
        mark(f"group {self.name} start")
        self.pg = self._placement_group()
        mark(f"group {self.name} placed")
        try:
            for attempt in range(3):
                self.actors = self._actors()
                try:
                    found = ray.get([a.rendezvous.remote() for a in self.actors])
                    (addr, port, _), gpus = found[0], ";".join(f[2] for f in found)
                    ray.get([a.join.remote(r, self.size, addr, port, gpus)
                             for r, a in enumerate(self.actors)])
                    mark(f"group {self.name} joined")
                    break
                except ray.exceptions.RayTaskError as exc:
                    # the free port rank 0 picked was taken before it listened: pick again
                    if "EADDRINUSE" not in str(exc) or attempt == 2:
                        raise
                    self._kill_actors()
        except BaseException:
            self.kill()  # a rank or its node lost while starting: nothing left behind
            raise
        self._keep_spares()  # outside: the spares' bookkeeping never undoes a formed group
        return self

    def _keep_spares(self) -> None:
        """Warm processes on the group's nodes for the ranks of its next formation
        (supervised runs, `flows/ray/spares.py`)."""
        spares.keep(self.name, self.pg, int(self.options.get("workers_per_node", 1)),
                    self.actors)

    def _kill_actors(self) -> None:
        """Kill the ranks' actors and wait until their names are free again."""
        import time

        import ray

        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        deadline = time.time() + 30
        for name in self.names():
            while time.time() < deadline:
                try:
                    ray.get_actor(name, namespace=detached.NAMESPACE if adopt.supervised() else None)
                except ValueError:
                    break
                time.sleep(0.1)
        self.actors = []

    def _actors(self) -> list[Any]:
        """One fresh actor per rank, in its bundle of the placement group."""
        import ray
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        per_node = int(self.options.get("workers_per_node", 1))
        ray.method(concurrency_group="durable")(GroupWorker.durable)  # not per call: Ray Client
        for method in (GroupWorker.calls, GroupWorker.call_numbered):
            ray.method(concurrency_group="control")(method)  # answered while a call runs
        remote = ray.remote(max_restarts=0, max_task_retries=0,
                            concurrency_groups={"durable": 1, "control": 1})(GroupWorker)
        return [remote.options(
            name=f"alignflow:{self.run_id}:{self.name}:{rank}",
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=self.pg, placement_group_bundle_index=rank // per_node),
            **self._per_worker(), **adopt.actor_options()).remote(
                self.factory, adopt.group_name(self.run_id, self.name))
            for rank in range(self.size)]

    def _per_worker(self) -> dict:
        memory = {"memory": self.options["memory"]} if self.options.get("memory") else {}
        return {"num_cpus": self.options.get("num_cpus", 1),
                "num_gpus": self.options.get("num_gpus", 0), **memory}

    def _placement_group(self) -> Any:
        from ray.util.placement_group import placement_group, remove_placement_group

        nodes = int(self.options.get("num_nodes", 1))
        per_node = int(self.options.get("workers_per_node", 1))
        res = self._per_worker()
        bundle = {"CPU": res["num_cpus"] * per_node}
        if res["num_gpus"]:
            bundle["GPU"] = res["num_gpus"] * per_node
        named = {"name": f"alignflow:{self.run_id}:{self.name}", **adopt.pg_options()} \
            if adopt.supervised() else {}
        pg = placement_group([dict(bundle) for _ in range(nodes)],
                             strategy="STRICT_SPREAD" if nodes > 1 else "PACK", **named)
        timeout = float(os.environ.get("ALIGNFLOW_PLACEMENT_TIMEOUT", "300"))
        if not pg.wait(timeout_seconds=timeout):
            remove_placement_group(pg)
            err = FlowError(f"worker group {self.name!r}: the cluster did not grant {nodes} "
                            f"node(s) with {bundle} each within {timeout:.0f}s "
                            "($ALIGNFLOW_PLACEMENT_TIMEOUT); expected that many nodes with "
                            "those free resources")
            err.kind = "system"
            raise err
        return pg

    def restore(self, store: Store, checkpoint: str) -> None:
        import ray

        mark(f"group {self.name} restore")
        ray.get([a.restore.remote(store, checkpoint) for a in self.actors])
        mark(f"group {self.name} restored")

    def submit(self, call: dict) -> GroupHandle:
        """The call on every rank; a group killed after a failure answers with a transient
        `ConnectionError`, so the driver rebuilds it before the retry."""
        self.seq += 1
        refs = [a.call.remote(dict(call, rank=r, world_size=self.size, group_seq=self.seq))
                for r, a in enumerate(self.actors)]
        return GroupHandle(self, refs)

    def durable(self, token: str) -> Any:
        """Rank 0's background work of a finished task, on its side thread (the ObjectRef)."""
        return self.actors[0].durable.remote(token)

    def pids(self) -> list[int]:
        import ray

        return ray.get([a.pid.remote() for a in self.actors])

    def kill(self) -> None:
        import ray
        from ray.util.placement_group import remove_placement_group

        for actor in self.actors:
            ray.kill(actor, no_restart=True)
        self.actors = []
        if self.pg is not None:
            remove_placement_group(self.pg)
            self.pg = None


class GroupHandle:
    """One task on every rank; `wait` returns rank 0's result or the first failure."""

    def __init__(self, group: RayWorkerGroup, refs: list[Any]) -> None:
        self.group, self.refs = group, refs

    def wait(self) -> dict:
        import ray

        if not self.refs:
            raise ConnectionError(f"worker group {self.group.name!r} was stopped after one of "
                                  "its ranks failed; it is rebuilt for the retry")
        results: dict[Any, dict] = {}
        pending = list(self.refs)
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            try:
                res = ray.get(done[0])
            except Exception:
                if pending:  # the others may be waiting for the dead rank in a collective
                    self.group.kill()
                raise
            if res["error"] is not None:
                if pending:
                    self._raise_dead_peer(pending)
                    self.group.kill()
                return res
            results[done[0]] = res
        return results[self.refs[0]]

    def _raise_dead_peer(self, pending: list[Any]) -> None:
        """A rank's error may only be the echo of a peer that died under it (a collective
        whose other side is gone): if a pending rank's actor is dead, raise that fault, which
        the driver retries on a rebuilt group, instead of failing the run with the echo."""
        import ray

        grace = float(os.environ.get("ALIGNFLOW_PEER_DEATH_GRACE", "5"))
        done, _ = ray.wait(pending, num_returns=len(pending), timeout=grace)
        for ref in done:
            try:
                ray.get(ref)
            except Exception:
                self.group.kill()
                raise
