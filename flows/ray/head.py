"""Starting an in-process Ray head that leaves nothing behind (`flows/ray/local.py` says
why each part is here).

Each try gets a session name of its own (Ray's format, `session_<time>_<pid>`, set through
`RayParams.session_name`, which `Node.__init__` uses as given), so its folder names exactly
the processes of that try; `reap_sessions` ends them, on a failed start, at `stop` and at
interpreter exit (also after a SIGTERM that Ray's handler turns into `sys.exit`).
"""

from __future__ import annotations

import atexit
import contextlib
import datetime
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from alignflow.errors import FlowError
from alignflow.flows import wrapper
from alignflow.flows.ray import niceness, reap, watch

START_TRIES = 2  # Ray's own waits are fixed: one more try, not a longer wait
_NO_PRESTART = {"enable_worker_prestart": False, "prestart_worker_first_driver": False}
_SESSIONS: list[str] = []  # session folders this process started, not yet reaped
_AT_EXIT: list[int] = []  # [pid] once the exit hook is registered (a fork inherits it)
_CANCELLED: list[bool] = []  # [True] once the process is on its way out: no more tries


class RayletExited(Exception):
    """Not a RuntimeError: Ray's wait for the node retries on those."""


def system_config() -> dict[str, Any]:
    """No prestarted idle workers; workers at the driver's priority (`niceness`)."""
    return {**_NO_PRESTART, "worker_niceness": niceness.worker_niceness()}


def start(temp_dir: str, **init: Any) -> None:
    """`ray.init(address="local", **init)` under `temp_dir`, lean; a failed try's processes
    are ended and the start is tried once more; after `START_TRIES`, one FlowError."""
    config = system_config()  # a wrong setting of the user's fails here, not retried
    for attempt in range(1, START_TRIES + 1):
        session = str(Path(temp_dir, _session_name()))
        _SESSIONS.append(session)
        _exit_hook()
        try:
            with _lean_head(session):
                _init(temp_dir, config, **init)
            watch.arm(session)  # a Ray process that dies from now on ends the driver
            return
        except Exception as exc:
            _failed(session, exc, attempt)


def _init(temp_dir: str, config: dict[str, Any], **init: Any) -> None:
    import ray

    ray.init(address="local", include_dashboard=False, _temp_dir=temp_dir,
             logging_level=logging.ERROR, log_to_driver=False, configure_logging=True,
             _system_config=config, **init)


def _failed(session: str, exc: Exception, attempt: int) -> None:
    """End the try's processes and Ray's half-made state; one line, then retry or raise."""
    import ray

    with contextlib.suppress(Exception):
        ray.shutdown()
    left = reap.reap(session)
    if not left:
        _SESSIONS.remove(session)
    why = f"{wrapper.first_line(exc)}; load {_load()}"
    if attempt < START_TRIES and not left and not _CANCELLED:
        print(f"alignflow: in-process Ray did not start ({why}); its processes were ended, "
              "trying once more", file=sys.stderr, flush=True)
        return
    err = FlowError(f"in-process Ray did not start in {attempt} tries ({why})"
                    + (f"; still alive: pids {left}" if left else "; its processes were "
                       "ended") + ". Expected CPU to spare for Ray's agents in their first "
                    "seconds: run again when the machine is less busy, or without Ray "
                    "(--executor inline)")
    err.kind = "system"
    raise err from exc


def _load() -> str:
    with contextlib.suppress(OSError):
        return f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
    return "unknown"


def _session_name() -> str:
    """Ray's own format (its tools list `session_*` folders); the time is to the µs."""
    stamp = datetime.datetime.today().strftime("%Y-%m-%d_%H-%M-%S_%f")
    return f"session_{stamp}_{os.getpid()}"


@contextlib.contextmanager
def _lean_head(session: str) -> Iterator[None]:
    """No dashboard process, autoscaler monitor or log monitor; the session folder chosen
    here; a raylet that died ends Ray's wait for it at once (private Ray hooks; when a Ray
    version lacks them, Ray starts as usual and `reap_sessions` finds nothing to end)."""
    try:
        from ray._private import parameter, services
    except ImportError:
        yield
        return
    params, api_server = parameter.RayParams.__init__, services.start_api_server
    get_node = services.get_node

    def lean_params(self: Any, *args: Any, **kwargs: Any) -> None:
        params(self, *args, **kwargs)
        self.no_monitor, self.include_log_monitor = True, False
        self.session_name = os.path.basename(session)

    parameter.RayParams.__init__, services.start_api_server = lean_params, _no_api_server
    services.get_node = lambda *a, **k: _watched(session, get_node, *a, **k)
    try:
        yield
    finally:
        parameter.RayParams.__init__, services.start_api_server = params, api_server
        services.get_node = get_node


def _watched(session: str, get_node: Any, *args: Any, **kwargs: Any) -> Any:
    """Ray's `services.get_node`, which blocks up to 30 s for a node that has not
    registered (the C++ accessor waits), on a thread, while this one checks that the
    session's raylet is alive: a raylet that died (its agents' ports did not appear in
    its fixed 15 s) ends the start at once instead of 30 s later."""
    import queue
    import threading

    out: queue.Queue = queue.Queue()

    def ask() -> None:
        try:
            out.put((True, get_node(*args, **kwargs)))
        except BaseException as exc:  # handed over below
            out.put((False, exc))
    threading.Thread(target=ask, name="alignflow-ray-node", daemon=True).start()
    while True:
        try:
            ok, value = out.get(timeout=0.25)
        except queue.Empty:
            if not reap.session_has(session, "raylet"):
                raise RayletExited(f"Ray's raylet exited during startup (its log: "
                                   f"{session}/logs/raylet.out)") from None
            continue
        if ok:
            return value
        raise value


def _no_api_server(*_args: Any, **_kwargs: Any) -> tuple[None, None]:
    return None, None


def cancel() -> None:
    """The process is ending (`local.stop`): a start that fails now is not tried again."""
    _CANCELLED.append(True)


def reap_sessions(timeout: float = 10.0) -> None:
    """Kill what is left of every session this process started (none when Ray's own
    shutdown ended them all)."""
    if _AT_EXIT and _AT_EXIT[0] != os.getpid():
        return  # a forked child: the sessions are its parent's
    while _SESSIONS:
        reap.reap(_SESSIONS.pop(), timeout)


def _exit_hook() -> None:
    if not _AT_EXIT:
        _AT_EXIT.append(os.getpid())
        atexit.register(reap_sessions)
