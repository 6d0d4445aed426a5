"""The chaos benchmark's fault injector: at a set rate, a seeded choice of one fault —
SIGKILL of a worker actor, of a generation engine, or of the driver, or a worker node lost
(its raylet and every process on it ended) and a fresh node joining in its place, as an
autoscaler or KubeRay would start one (a node is not hit again before its replacement has
joined).

The schedule — when, and which kind — is drawn from the seed alone, up front (`schedule`),
so runs under different settings meet the same faults: at its time, a kind with no live
target (or a node while the last one lost is still being replaced) is skipped and recorded,
not redrawn, which would make the mix depend on the cluster's state. Which target of the
kind is hit comes from a second seeded stream.

Targets are found from Ray's own state (the GCS: the simulated cluster runs no dashboard)
and the supervisor's child processes; only processes of the run under test are touched."""

from __future__ import annotations

import contextlib
import os
import queue
import random
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

KINDS = ("actor", "engine", "node", "driver")


@dataclass
class Fault:
    at: float  # seconds after the run started
    kind: str
    target: str  # what was hit; for a skipped fault, why it was skipped


def schedule(seed: int, interval: float, kinds: tuple[str, ...],
             horizon: float) -> list[tuple[float, str]]:
    """(offset after arming, kind) of every fault up to `horizon` s: one per `interval` s
    (jitter ±50%), from the seed alone — the same faults whatever the cluster does."""
    rng, at, out = random.Random(seed), 0.0, []
    while interval > 0:
        at += interval * rng.uniform(0.5, 1.5)
        if at > horizon:
            return out
        out.append((round(at, 3), rng.choice(kinds)))
    return out


@dataclass
class Injector:
    """Fires the seed's `schedule` (one fault per `interval` s) until `stop()`."""

    sim: Any  # tasks.simulate.cluster.SimulatedCluster, started
    run_id: str
    supervisor: psutil.Process
    interval: float
    seed: int
    kinds: tuple[str, ...] = KINDS
    armed: Any = None  # faults start once armed() is true (default: at once)
    horizon: float = 3600.0  # the schedule's length, s after arming (the run's longest)
    faults: list[Fault] = field(default_factory=list)
    skipped: list[Fault] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.plan = schedule(self.seed, self.interval, self.kinds, self.horizon)
        self.rng = random.Random(f"targets-{self.seed}")  # apart from the plan's stream
        self.main: queue.Queue = queue.Queue()  # what must run on the main thread (Ray's)
        self.replacing = threading.Event()  # a lost node's replacement is starting
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self.started = time.time()
        self.armed_at: float | None = None

    def start(self) -> Injector:
        self.started = time.time()
        self._thread.start()
        return self

    def stop(self) -> list[Fault]:
        self._stop.set()
        self._thread.join(timeout=120)
        return self.faults

    def _loop(self) -> None:
        while self.armed is not None and not self.armed():
            if self._stop.wait(0.2):
                return
        armed = time.time()
        self.armed_at = round(armed - self.started, 1)
        for offset, kind in self.plan:
            if self._stop.wait(max(0.0, armed + offset - time.time())):
                return
            self._fire(kind, round(time.time() - self.started, 1))

    def _fire(self, kind: str, at: float) -> None:
        """Hit a seeded target of `kind`, or record the fault skipped: none to hit now."""
        if kind == "node" and self.replacing.is_set():
            self.skipped.append(Fault(at, kind, "the last node lost is being replaced"))
            return
        targets = self._targets(kind)
        if not targets:
            self.skipped.append(Fault(at, kind, "no live target"))
            return
        name, hit = self.rng.choice(sorted(targets.items()))
        self.faults.append(Fault(at, kind, name))
        hit()

    # -- targets: {name: how to hit it} ---------------------------------------------------
    def _targets(self, kind: str) -> dict[str, Any]:
        if kind == "driver":
            return {f"driver pid {p.pid}": _killer(p.pid) for p in _drivers(self.supervisor)}
        if kind == "node":
            nodes = list(self.sim._ray.worker_nodes)
            return {f"worker node {i + 1}": (lambda n=n: self._lose(n))
                    for i, n in enumerate(nodes)}
        return {f"{a['name'] or a['cls']} pid {a['pid']}": _killer(a["pid"])
                for a in _actors(self.run_id) if (a["cls"] == "EngineHost") == (kind == "engine")}

    def wait(self, proc: Any, timeout: float) -> int:
        """Wait for `proc`, running the node replacements meanwhile (Ray starts a node only
        from the main thread); returns its exit code."""
        deadline = time.time() + timeout
        while proc.poll() is None:
            if time.time() > deadline:
                raise TimeoutError(f"the run did not end within {timeout:.0f}s")
            with contextlib.suppress(queue.Empty):
                self.main.get(timeout=0.2)()
        return proc.returncode

    def _lose(self, node: Any) -> None:
        self.replacing.set()
        self.main.put(lambda: self._replace_node(node))

    def _replace_node(self, node: Any) -> None:
        """The node lost, and a fresh one (same resources) joining in its place."""
        ray_cluster = self.sim._ray
        index = 1 + list(ray_cluster.worker_nodes).index(node)
        try:
            ray_cluster.remove_node(node, allow_graceful=False)
            ray_cluster.add_node(**self.sim._node_args(index))
        finally:
            self.replacing.clear()


def _killer(pid: int) -> Any:
    def kill() -> None:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    return kill


def _drivers(supervisor: psutil.Process) -> list[psutil.Process]:
    try:
        return [p for p in supervisor.children() if p.is_running()
                and p.status() != psutil.STATUS_ZOMBIE]
    except psutil.NoSuchProcess:
        return []


def _actors(run_id: str) -> list[dict]:
    """Live actors of the run: its worker groups (`alignflow:<run>:…`) and engines."""
    from ray._private import state

    out = []
    for a in state.actors().values():
        if a.get("State") != "ALIVE" or not a.get("Pid"):
            continue
        name, cls = a.get("Name") or "", a.get("ActorClassName") or ""
        if name.startswith(f"alignflow:{run_id}:") or cls == "EngineHost":
            out.append({"name": name, "cls": cls, "pid": a["Pid"]})
    return out
