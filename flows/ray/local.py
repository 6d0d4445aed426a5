"""In-process Ray for one machine: lean, and started early.

`ray.init(address="local")` starts, besides the GCS, the raylet and its two agents, a
dashboard process (even with `include_dashboard=False`), the autoscaler's monitor, a log
monitor and prestarted idle workers: about 300 MB and seconds of CPU a local run never
uses. `start` leaves those out. `start_early` does it on a thread while the caller goes on
checking config and data (the CLI calls it first thing, and has the warm worker pool of
`flows/ray/pool.py` created there too).

The thread stays alive: Ray's node processes die with the thread that started them
(PR_SET_PDEATHSIG follows the creating thread, not the process).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

from alignflow.timeline import mark

TEMP_DIR = "/tmp/alignflow-ray"
_SYSTEM = {"enable_worker_prestart": False, "prestart_worker_first_driver": False}
_EARLY: dict[str, Any] = {}  # "thread", "ready" (Event), "error", "where"
_SAID: set[str] = set()  # "where" lines already printed
_OWN_NODE: list[bool] = []  # [True] once this process started a node (not joined one)


@contextlib.contextmanager
def _lean_head() -> Iterator[None]:
    """No dashboard process, autoscaler monitor or log monitor (private Ray hooks; when a
    Ray version lacks them, Ray starts as usual)."""
    try:
        from ray._private import parameter, services
    except ImportError:
        yield
        return
    params, api_server = parameter.RayParams.__init__, services.start_api_server

    def lean_params(self: Any, *args: Any, **kwargs: Any) -> None:
        params(self, *args, **kwargs)
        self.no_monitor, self.include_log_monitor = True, False
    parameter.RayParams.__init__ = lean_params
    services.start_api_server = lambda *a, **k: (None, None)
    try:
        yield
    finally:
        parameter.RayParams.__init__, services.start_api_server = params, api_server


def _init(num_cpus: int) -> str:
    import ray

    if ray.is_initialized():
        return "the Ray instance already running in this process"
    mark("ray init")
    with _lean_head():
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False,
                 _temp_dir=TEMP_DIR, logging_level=logging.ERROR, log_to_driver=False,
                 configure_logging=True, _system_config=_SYSTEM)
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
                                                      daemon=True))
    _EARLY["thread"].start()


def start(*, quiet: bool = False) -> None:
    """Ray in-process (joining an early start if one is under way)."""
    import ray

    if _EARLY:
        _EARLY["ready"].wait()
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
    killed outright instead of `ray.shutdown()`'s orderly stop (0.3-0.5 s here)."""
    if _EARLY:
        _EARLY["ready"].wait(timeout)
    ray = sys.modules.get("ray")
    if ray is None or not getattr(ray, "is_initialized", lambda: False)():
        return
    if exiting and _OWN_NODE:
        _kill_own_node()
        return
    ray.shutdown()


def _kill_own_node() -> None:
    """SIGKILL every process under this one (the node's GCS, raylet, agents and workers),
    all listed before any dies. Their parent-death signal alone is not enough: the raylet's
    agents, reparented to init, were seen alive a minute after the command ended. Not
    waited for: a killed grandchild stays a zombie until init reaps it (1.7 s here)."""
    import psutil

    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.Error):
            process.kill()
