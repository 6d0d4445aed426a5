"""The driver of the simulated-cluster tests: a child process that starts one simulated
cluster (`tasks/simulate/cluster.py`), joins it, and runs flows on it on request.

A child, because a process that joins a simulated cluster keeps its Ray token auth for its
life (Ray reads the mode once): the pytest process stays as it was for the other tests.
One cluster serves every test of its shape; `Simulated.use(spec)` starts another (after
stopping the first) only when a test asks for another shape. A run that hangs takes its
cluster down with it (every process the child started, by PID), so the tests go on.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import shutil
import tempfile
import time
import traceback
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

import psutil

_SIM: dict[str, Any] = {}  # in the child: the cluster


def _start(nodes: int, gpus: int, folder: str) -> None:
    """The child's initializer: the cluster up and joined."""
    import os

    os.environ.setdefault("DS_ACCELERATOR", "cpu")
    from alignflow.tasks.simulate.cluster import SimulatedCluster

    sim = SimulatedCluster(nodes, gpus, folder=folder).start()
    sim.connect()
    _SIM["cluster"] = sim


def _run(flow: str, sets: list[str], store: str, run_id: str, seed: int) -> dict:
    """One run on the cluster: its output or error, and what each process saw."""
    from alignflow.flows.cli.clusters import record
    from alignflow.flows.config import load_config
    from alignflow.flows.control import api
    from alignflow.flows.loader import load_flow

    sim, started, error, output = _SIM["cluster"], time.time(), None, None
    try:
        fn, cls = load_flow(flow)
        output = api.run(fn, load_config(cls, sets=sets), store=store, executor="ray",
                         address=sim.address, seed=seed, run_id=run_id)
    except BaseException as exc:  # the test reads it
        error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc()}"
    seen = sim.sightings(clear=True)
    if error is None or "already exists" not in error:
        record(api.open_store(store), run_id, seen)
    return {"output": output, "error": error, "sightings": seen, "seconds": time.time() - started}


def _stop() -> None:
    sim = _SIM.pop("cluster", None)
    if sim is not None:
        sim.stop()


class Simulated:
    """The simulated cluster the tests share, one shape at a time."""

    def __init__(self) -> None:
        self.spec: str | None = None
        self.folder = ""  # the cluster's folder (the child removes it when it stops it)
        self.pool: ProcessPoolExecutor | None = None
        self.started = 0.0  # seconds the last cluster took to start

    def use(self, spec: str) -> Simulated:
        if spec != self.spec:
            self.close()
            nodes, gpus = (int(x) for x in spec.split("x"))
            begin, self.folder = time.time(), tempfile.mkdtemp(prefix="afsim-", dir="/tmp")
            self.pool = ProcessPoolExecutor(1, mp_context=mp.get_context("spawn"),
                                            initializer=_start,
                                            initargs=(nodes, gpus, self.folder))
            self.pool.submit(time.time).result(timeout=300)  # the cluster is up
            self.spec, self.started = spec, time.time() - begin
        return self

    def run(self, flow: str, sets: list[str], store, run_id: str, seed: int = 1, *,
            timeout: float = 300.0) -> dict:
        """The run's result; a run that hangs (no answer within `timeout`) has its cluster
        stopped (the next test starts another) and answers with that error."""
        assert self.pool is not None, "use(spec) first"
        future = self.pool.submit(_run, flow, sets, str(store), run_id, seed)
        try:
            return future.result(timeout=timeout)
        except FutureTimeout:
            self._abandon()
            return {"output": None, "sightings": [], "seconds": timeout,
                    "error": f"hung: no result within {timeout:g}s (its cluster was stopped)"}

    def _abandon(self) -> None:
        """Kill the child and every process it started (nodes, their workers), by PID."""
        children = [psutil.Process(p) for p in (self.pool._processes or {})]  # one child
        family = [q for p in children for q in (p, *p.children(recursive=True))]
        for proc in family:
            with contextlib.suppress(psutil.Error):
                proc.kill()
        psutil.wait_procs(family, timeout=30)
        self.pool.shutdown(wait=False, cancel_futures=True)
        shutil.rmtree(self.folder, ignore_errors=True)
        self.pool, self.spec = None, None

    def close(self) -> None:
        if self.pool is not None:
            try:
                self.pool.submit(_stop).result(timeout=120)
            finally:
                self.pool.shutdown(wait=True)
        self.pool, self.spec = None, None
