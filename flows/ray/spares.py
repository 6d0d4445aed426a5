"""Warm spare processes for supervised runs: a rank that dies is replaced by a process that
has already imported torch, transformers and the flow's modules.

A new Ray worker spends seconds importing before it can load a model (~3 s for torch and
transformers' Llama stack on two cores; the bulk of a lost rank's recovery,
`bench/RESULTS.md`, Chaos). Ray's raylet can start workers ahead of any task or actor
(its `PrestartWorkers` call, bound to a job and its runtime environment), and it hands such
an idle, never-used worker to the next actor of that job, placement group bundle and GPUs
included. So a supervised run's driver joins Ray with a worker setup hook that imports the
flow's modules (`import_ahead`), and keeps `per_node` idle workers of its job on every node
its worker groups live on (`keep`): the replacement ranks of a group formed again start in
~0.1 s instead of ~3 s. A spare imports in the machine's idle time until it is given work
(`warm_imports`): it is for the next fault, not this one. The spares hold no GPU and no
model (~400 MiB of host memory each); they end with their driver's job. Ray exposes no
public API for this: where its internals differ (another Ray version), the run goes on
without spares and says so once.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from typing import Any

from alignflow.flows.ray import adopt
from alignflow.flows.ray.warm_imports import WarmImports
from alignflow.timeline import mark

IMPORTS_ENV = "ALIGNFLOW_SPARE_IMPORTS"  # comma-separated modules a spare imports at start
HOOK = "alignflow.flows.ray.spares.import_ahead"
BASE_IMPORTS = ("torch", "transformers.modeling_utils")
KEEP_ALIVE_S = 3600  # Ray keeps a prestarted worker this long before it may reap it
PERIOD_S = 5.0  # how often the driver tops the spares up
STARTING_S = 15.0  # a spare asked for and not seen yet counts as starting this long


def runtime_env(modules: tuple[str, ...]) -> dict | None:
    """The job runtime environment a supervised driver joins Ray with (None: no spares —
    not supervised, or the job already has a setup hook of its own)."""
    if not adopt.supervised() or _job_has_hook():
        return None
    imports = ",".join(dict.fromkeys((*BASE_IMPORTS, *modules)))
    return {"worker_process_setup_hook": HOOK, "env_vars": {IMPORTS_ENV: imports}}


def _job_has_hook() -> bool:
    """A job submitted with its own setup hook (Ray refuses two)."""
    from ray._private.runtime_env.constants import RAY_JOB_CONFIG_JSON_ENV_VAR

    config = json.loads(os.environ.get(RAY_JOB_CONFIG_JSON_ENV_VAR) or "{}")
    return bool((config.get("runtime_env") or {}).get("worker_process_setup_hook"))


def import_ahead() -> None:
    """Ray's worker setup hook: import the run's modules before any task or actor arrives,
    in the machine's idle time until one does (`warm_imports`). A module that fails to
    import is left to the task that needs it (its error is the task's, with its context)."""
    global _warming
    try:
        from ray._private import utils as ray_utils

        ray_set = ray_utils.set_omp_num_threads_if_unset
    except (ImportError, AttributeError):  # torch's threads could not follow Ray's: as before
        return
    mark("spare importing")
    _warming = WarmImports(list(filter(None, os.environ.get(IMPORTS_ENV, "").split(","))))
    ray_utils.set_omp_num_threads_if_unset = _then_torch_follows(ray_utils, ray_set, _warming)
    _warming.start()


_warming: WarmImports | None = None  # this worker's imports ahead, while they run


def _then_torch_follows(ray_utils: Any, ray_set: Any, warming: WarmImports) -> Any:
    """Ray sets OMP_NUM_THREADS from the CPUs of a worker's first task or actor just before
    running it, and torch sizes its thread pool when imported: imported here, earlier, it
    took every core (six processes on two cores ran 2.4x slower). So the imports ahead are
    finished first, and once Ray has set the count torch follows, once (a host that sets its
    own threads afterwards keeps them)."""

    def set_then_follow() -> bool:
        ray_utils.set_omp_num_threads_if_unset = ray_set
        warming.finish()
        changed = ray_set()
        threads = os.environ.get("OMP_NUM_THREADS", "")
        if threads.isdigit() and "torch" in sys.modules:
            sys.modules["torch"].set_num_threads(int(threads))
        return changed

    return set_then_follow


class _Ledger:
    """The spares this driver asked one node for. Idle workers of the job that never ran
    anything are not all spares: Ray starts some for other leases (a restarted engine's
    runtime environment, a host without GPUs) that no rank can take. So a spare is a worker
    that appeared after an ask (at most as many as asked), until it is no longer idle
    (taken, or dead); and one that a rank formed beside it did not take, starting a new
    process instead, is not one (`formed`)."""

    def __init__(self) -> None:
        self.ours: set[int] = set()
        self.unusable: set[int] = set()
        self.asks: list[tuple[float, int, set[int]]] = []  # (when, how many unseen, idle then)

    def formed(self, rank_pids: set[int]) -> None:
        """Ranks just started on this node in these processes."""
        if rank_pids - self.ours:  # a rank started cold: the spares it passed over are not
            self.unusable |= self.ours - rank_pids
        self.ours -= rank_pids | self.unusable

    def learn(self, idle: set[int], now: float) -> None:
        self.ours &= idle
        asks = []
        for when, unseen, before in self.asks:
            new = sorted(idle - before - self.ours - self.unusable)[:unseen]
            self.ours.update(new)
            if unseen > len(new) and now - when < STARTING_S:  # one taken before it was
                asks.append((when, unseen - len(new), before))  # seen idle expires
        self.asks = asks

    def missing(self, wanted: int) -> int:
        return wanted - len(self.ours) - sum(unseen for _, unseen, _ in self.asks)

    def asked(self, count: int, idle: set[int], now: float) -> None:
        self.asks.append((now, count, set(idle)))


class _Keeper:
    """The driver's thread that keeps `per_node` idle spares of its job on each node: it
    looks every PERIOD_S seconds, and at once when a group has formed (and may have taken
    spares)."""

    def __init__(self) -> None:
        self.wanted: dict[str, dict[str, int]] = {}  # owner -> node id -> spares wanted
        self.ledgers: dict[str, _Ledger] = {}  # node id -> its spares
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.thread: threading.Thread | None = None
        self.broken = False

    def want(self, owner: str, nodes: dict[str, int], ranks: dict[str, set[int]]) -> None:
        with self.lock:
            self.wanted[owner] = dict(nodes)
            for node_id, pids in ranks.items():
                self.ledgers.setdefault(node_id, _Ledger()).formed(pids)
        self.wake.set()
        if self.thread is None:
            self.thread = threading.Thread(target=self._loop, name="alignflow-spares",
                                           daemon=True)
            self.thread.start()

    def _loop(self) -> None:
        while not self.broken:
            self.wake.clear()
            try:
                self.top_up()
            except Exception as exc:  # not a lost node: Ray's internals differ, no spares
                self.broken = True
                print(f"alignflow: warm spares off for this run ({type(exc).__name__}: "
                      f"{str(exc).splitlines()[0] if str(exc) else ''}); a replaced rank "
                      "starts a new process", file=sys.stderr, flush=True)
                return
            self.wake.wait(PERIOD_S)

    def top_up(self) -> None:
        with self.lock:
            per_node: dict[str, int] = {}
            for nodes in self.wanted.values():
                for node_id, count in nodes.items():
                    per_node[node_id] = max(per_node.get(node_id, 0), count)
        if not per_node:
            return
        import grpc

        raylets = _raylets()
        for node_id, count in per_node.items():
            if node_id in raylets:
                try:
                    self._top_up_node(node_id, raylets[node_id], count)
                except grpc.RpcError:  # the node was lost since: its replacement is asked
                    _STUBS.pop(node_id, None)  # when a group forms there

    def _top_up_node(self, node_id: str, stub: Any, count: int) -> None:
        now, idle = time.time(), _idle_workers(stub)
        with self.lock:
            ledger = self.ledgers.setdefault(node_id, _Ledger())
            ledger.learn(idle, now)
            missing = ledger.missing(count)
            if missing > 0:
                ledger.asked(missing, idle, now)
        if missing > 0:
            _prestart(stub, missing)
            mark(f"spares asked {missing}")


_KEEPER = _Keeper()


def keep(owner: str, pg: Any, per_node: int, actors: list[Any]) -> None:
    """Keep `per_node` spares on every node of placement group `pg`, where worker group
    `owner` just formed with `actors` (rank r in bundle r // per_node), from now on; a
    no-op unless this job was joined with `runtime_env`."""
    if not _job_hooked():
        return
    import ray

    bundles = ray.util.placement_group_table(pg).get("bundles_to_node_id", {})
    ranks: dict[str, set[int]] = {}
    for rank, pid in enumerate(ray.get([a.pid.remote() for a in actors])):
        ranks.setdefault(bundles[rank // per_node], set()).add(pid)
    _KEEPER.want(owner, {node_id: per_node for node_id in bundles.values()}, ranks)


def _job_hooked() -> bool:
    import ray

    env = ray.get_runtime_context().runtime_env or {}
    return IMPORTS_ENV in (env.get("env_vars") or {})


def _raylets() -> dict[str, Any]:
    """Node id -> a gRPC stub of its raylet, for the nodes alive now."""
    import ray

    out = {}
    for node in ray.nodes():
        if node.get("Alive"):
            address = f"{node['NodeManagerAddress']}:{node['NodeManagerPort']}"
            out[node["NodeID"]] = _stub(node["NodeID"], address)
    return out


_STUBS: dict[str, Any] = {}  # node id -> its raylet's stub


def _stub(node_id: str, address: str) -> Any:
    if node_id not in _STUBS:
        from ray._private.grpc_utils import init_grpc_channel
        from ray.core.generated import node_manager_pb2_grpc

        _STUBS[node_id] = node_manager_pb2_grpc.NodeManagerServiceStub(
            init_grpc_channel(address))
    return _STUBS[node_id]


def _idle_workers(stub: Any) -> set[int]:
    """Pids of this job's workers on the node that never ran a task or held an actor."""
    import ray
    from ray.core.generated import common_pb2, node_manager_pb2

    job = ray.get_runtime_context().get_job_id()
    reply = stub.GetNodeStats(node_manager_pb2.GetNodeStatsRequest(), timeout=10)
    nil_actor = bytes.fromhex("ff" * 16)
    return {w.pid for w in reply.core_workers_stats
            if w.worker_type == common_pb2.WORKER and w.job_id.hex() == job
            and w.actor_id in (b"", nil_actor) and not w.num_executed_tasks}


def _prestart(stub: Any, count: int) -> None:
    import ray
    from ray.core.generated import common_pb2, node_manager_pb2

    worker = ray._private.worker.global_worker
    request = node_manager_pb2.PrestartWorkersRequest(
        language=common_pb2.PYTHON, job_id=worker.current_job_id.binary(),
        runtime_env_info=worker.core_worker.get_job_config().runtime_env_info,
        keep_alive_duration_secs=KEEP_ALIVE_S, num_workers=count)
    stub.PrestartWorkers(request, timeout=10)
