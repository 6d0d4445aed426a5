"""In-process Ray for one machine: lean, and started early.

`ray.init(address="local")` starts, besides the GCS, the raylet and its two agents, a
dashboard process (even with `include_dashboard=False`), the autoscaler's monitor, a log
monitor and prestarted idle workers: about 300 MB and seconds of CPU a local run never
uses. `start` leaves those out. `start_early` does it on a thread while the caller goes on
checking config and data (the CLI calls it first thing, and has the warm worker pool of
`flows/ray/pool.py` created there too).

The thread stays alive: Ray's node processes die with the thread that started them
(PR_SET_PDEATHSIG follows the creating thread, not the process). The raylet's agents do
not: every session this process starts is named here, and whatever of it is still alive
when a start fails, at `stop` or at interpreter exit is killed (`flows/ray/reap.py`).

A start can fail on a busy node through no fault of the run: the raylet waits a fixed 15 s
for its dashboard agent's port file (Ray 2.60's `NodeManager::WaitForDashboardAgentPorts`;
`agent_register_timeout_ms` does not change that wait, measured), and `ray.init` a fixed
30 s for the raylet (`raylet_start_wait_time_s` in ray/_private/node.py). Neither wait can
be set, so a failed start is tried once more (the agents' imports are then in the page
cache), with one line saying so, and a dead raylet ends the wait at once.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from alignflow.flows.ray import head, watch
from alignflow.timeline import mark

TEMP_DIR = "/tmp/alignflow-ray"
_EARLY: dict[str, Any] = {}  # "thread", "ready" (Event), "error", "where"
_SAID: set[str] = set()  # "where" lines already printed
_OWN_NODE: list[bool] = []  # [True] once this process started a node (not joined one)


def _init(num_cpus: int) -> str:
    import ray

    if ray.is_initialized():
        return "the Ray instance already running in this process"
    mark("ray init")
    head.start(TEMP_DIR, num_cpus=num_cpus)
    _OWN_NODE.append(True)
    mark("ray ready")
    return f"in-process Ray ({num_cpus} CPUs, temp {TEMP_DIR})"


def start_early(then: Callable[[], None] = lambda: None) -> None:
    """Start Ray on a background thread, then call `then` there (e.g. start the warm pool)."""
    if _EARLY or os.environ.get("ALIGNFLOW_EARLY_RAY", "1") == "0":
        return
    ready = threading.Event()

    def run() -> None:
        try:
            _EARLY["where"] = _init(os.cpu_count() or 1)
            then()
        except BaseException as exc:  # handed to whoever waits for Ray
            _EARLY["error"] = exc
        ready.set()
        threading.Event().wait()  # keep the node processes' parent thread alive

    _EARLY.update(ready=ready, thread=threading.Thread(target=run, name="alignflow-ray",
                                                      daemon=True), pid=os.getpid())
    atexit.register(_stop_at_exit)
    _EARLY["thread"].start()


def _stop_at_exit() -> None:
    """An interpreter that exits while the early start is under way (an exception, or a
    SIGTERM turned into one): let the start finish, then end its node and sessions."""
    if _EARLY.get("pid") == os.getpid():  # not in a forked child
        stop(exiting=True)


def start(*, quiet: bool = False) -> None:
    """Ray in-process (joining an early start if one is under way)."""
    import ray

    if _EARLY:
        try:
            _EARLY["ready"].wait()
        except BaseException:  # e.g. SIGTERM as KeyboardInterrupt: the start is not retried
            head.cancel()
            raise
        if "error" in _EARLY:
            raise _EARLY["error"]
        where = _EARLY["where"]
    elif ray.is_initialized():
        return
    else:
        where = _init(os.cpu_count() or 1)
    if not quiet and where not in _SAID:
        print(f"alignflow: running on {where}", file=sys.stderr)
        _SAID.add(where)


def stop(timeout: float = 60.0, *, exiting: bool = False) -> None:
    """Shut in-process Ray down, first waiting for an early start under way: a node left half
    started by a process that exits (a config error found meanwhile) would outlive it.
    `exiting`: the process ends right after (`os._exit`), so a node this process started is
    killed outright instead of `ray.shutdown()`'s orderly stop (0.3-0.5 s here). Either
    way, what is left of this process's sessions (the raylet's agents) is killed after."""
    watch.disarm()  # what dies from here on is Ray being stopped, not a fault
    if exiting:
        head.cancel()
    if _EARLY:
        _EARLY["ready"].wait(timeout)
    ray = sys.modules.get("ray")
    if ray is not None and getattr(ray, "is_initialized", lambda: False)():
        if exiting and _OWN_NODE:
            _kill_own_node()
        else:
            ray.shutdown()
    head.reap_sessions()


def _kill_own_node() -> None:
    """SIGKILL every process under this one (the node's GCS, raylet, agents and workers),
    all listed before any dies. Their parent-death signal alone is not enough: the raylet's
    agents, reparented to init, were seen alive a minute after the command ended. Not
    waited for: a killed grandchild stays a zombie until init reaps it (1.7 s here)."""
    import psutil

    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            process.kill()
