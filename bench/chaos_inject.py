"""The chaos benchmark's fault injector: at a set rate, a seeded choice of one fault —
SIGKILL of a worker actor, of a generation engine, or of the driver, or a worker node lost
(its raylet and every process on it ended) and a fresh node joining in its place, as an
autoscaler or KubeRay would start one (a node is not hit again before its replacement has
joined).

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
    target: str


@dataclass
class Injector:
    """Fires a fault every `interval` s (seeded jitter ±50%) until `stop()`."""

    sim: Any  # tasks.simulate.cluster.SimulatedCluster, started
    run_id: str
    supervisor: psutil.Process
    interval: float
    seed: int
    kinds: tuple[str, ...] = KINDS
    armed: Any = None  # faults start once armed() is true (default: at once)
    faults: list[Fault] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.rng = random.Random(self.seed)
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
        self.armed_at = round(time.time() - self.started, 1)
        while not self._stop.wait(self.interval * self.rng.uniform(0.5, 1.5)):
            options = {k: t for k in self.kinds if (t := self._targets(k))}
            if not options:
                continue
            kind = self.rng.choice(sorted(options))
            name, hit = self.rng.choice(sorted(options[kind].items()))
            self.faults.append(Fault(round(time.time() - self.started, 1), kind, name))
            hit()

    # -- targets: {name: how to hit it} ---------------------------------------------------
    def _targets(self, kind: str) -> dict[str, Any]:
        if kind == "driver":
            return {f"driver pid {p.pid}": _killer(p.pid) for p in _drivers(self.supervisor)}
        if kind == "node":
            if self.replacing.is_set():  # the last one lost is not back yet: nothing to hit
                return {}
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
