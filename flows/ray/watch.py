"""Liveness of the in-process Ray node itself: a dead Ray process ends the driver at once.

Ray's processes depend on each other, and a driver waiting on them does not notice their
death: after the dashboard agent was killed the raylet exited and a driver waited 16.5
minutes with no error (issue 46). The node this process started (`flows/ray/head.py`) is
four processes: the GCS and the raylet (children of this process), the raylet's dashboard
agent and runtime-env agent (its children). `arm` watches their pids on a thread with
Linux pidfds (woken by the first exit, no polling), and on the first death:

1. names it (`lost()`), and interrupts the main thread like Ctrl-C: the run is recorded
   RESUMABLE and its lease released on the way out, and the command ends with one line
   (`line()`) and exit code `EXIT_CODE`, which `--supervise` restarts as a resume;
2. if the process is still alive `GRACE_S` later (its exit path hung on the dead node),
   says the line itself, ends what is left of the session and exits with `EXIT_CODE`.
   A program that embeds alignflow (`api.run`) gets the same interrupt; it stays alive
   past the grace only by calling `ray.shutdown()` (no Ray call can finish without the node).

An orderly `ray.shutdown()` disconnects before it stops the node, and `local.stop`
disarms first, so neither counts as a death.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable

EXIT_CODE = 75  # EX_TEMPFAIL: nothing is wrong with the run; a new driver can go on
GRACE_S = 12.0  # the exit path's time before the process is ended outright (bound ≤ 30 s)
FIND_S = 10.0  # how long the agents may take to appear after `ray.init` returned
# what the watch names, by program: the GCS and raylet by /proc comm, the agents by title
COMPONENTS = {"gcs_server": "GCS server (gcs_server)", "raylet": "raylet",
              "ray::DashboardAgent": "dashboard agent (ray::DashboardAgent)",
              "ray::RuntimeEnvAgent": "runtime-env agent (ray::RuntimeEnvAgent)"}
_ORDER = ("ray::DashboardAgent", "ray::RuntimeEnvAgent", "gcs_server", "raylet")  # causes first
# the raylet's log names the agent it fate-shared with (and then killed the other one)
_LOGGED = {"ray::DashboardAgent": "dashboard_agent failed",
           "ray::RuntimeEnvAgent": "runtime_env_agent failed"}
_STATE: dict = {"armed": False, "lost": None, "said": False, "gen": 0}


def arm(session: str) -> None:
    """Watch the node of `session` (this process's own node) from a daemon thread."""
    if sys.platform != "linux" or not hasattr(os, "pidfd_open"):
        return
    gen = _STATE["gen"] + 1  # a watch of an earlier node (stopped) never acts
    _STATE.update(armed=True, lost=None, said=False, session=session, pid=os.getpid(), gen=gen)
    threading.Thread(target=_watch, args=(session, gen), name="alignflow-ray-watch",
                     daemon=True).start()


def disarm() -> None:
    """This process is stopping Ray itself: no death from now on is a fault."""
    _STATE["armed"] = False


def on_exit(record: Callable[[], None] | None) -> None:
    """What runs before the watch ends the process outright (`_interrupt`): the run's
    record, so that it reads RESUMABLE even when the main thread, blocked in a call into a
    dead node, never reached its own exit path within `GRACE_S`."""
    _STATE["on_exit"] = record


def lost() -> str | None:
    """The dead Ray component, in words, once the watch saw one (else None)."""
    return _STATE["lost"]


def settle(exc: BaseException, timeout: float = 3.0) -> str | None:
    """The dead Ray component, when `exc` (a Ray error in the main thread) may be Ray's node
    dying: Ray's error can reach the driver before this watch's thread names the process
    (its pidfd wakes it a little later on a busy node), so wait for that word, briefly."""
    ray = sys.modules.get("ray")
    if not _STATE["armed"] or ray is None or not isinstance(exc, ray.exceptions.RayError):
        return _STATE["lost"]
    if _STATE["lost"] is None and len(components(_STATE["session"])) == len(COMPONENTS):
        return None  # the node is whole: a worker's death, not the node's (no wait)
    deadline = time.monotonic() + timeout
    while _STATE["lost"] is None and time.monotonic() < deadline:
        time.sleep(0.05)
    return _STATE["lost"]


def interrupted() -> str:
    """Why the driver was interrupted, for its run's record."""
    return f"ended: Ray's {_STATE['lost']} died" if _STATE["lost"] else "interrupted"


def line() -> str:
    """The one line the driver ends with (said once: later calls return "")."""
    if _STATE["lost"] is None or _STATE["said"]:
        return ""
    _STATE["said"] = True
    return (f"error: Ray's {_STATE['lost']} died, so this driver's Ray node is gone; the "
            f"run is left resumable (exit code {EXIT_CODE}: `--supervise` resumes it, or "
            "run `alignflow resume RUN_ID`)")


def components(session: str) -> dict[str, int]:
    """Program name -> pid of the session's node processes alive now."""
    import psutil

    found: dict[str, int] = {}
    with contextlib.suppress(psutil.Error):
        for child in psutil.Process().children():
            name = child.name()
            if name in ("gcs_server", "raylet") and session in " ".join(child.cmdline()):
                found[name] = child.pid
                if name == "raylet":
                    found.update(_agents(child))
    return found


def _agents(raylet: object) -> dict[str, int]:
    import psutil

    found = {}
    with contextlib.suppress(psutil.Error):
        for agent in raylet.children():  # type: ignore[attr-defined]
            title = (agent.cmdline() or [""])[0].strip()
            if title in COMPONENTS:
                found[title] = agent.pid
    return found


def _watch(session: str, gen: int) -> None:
    """Find the four processes, wait for the first to exit, act on it."""
    fds: dict[int, str] = {}
    deadline = time.monotonic() + FIND_S
    while _fault(gen) and len(fds) < len(COMPONENTS):
        for name, pid in components(session).items():
            if name not in fds.values():
                with contextlib.suppress(OSError):
                    fds[os.pidfd_open(pid)] = name
        if time.monotonic() > deadline or _exited(fds, timeout_ms=200):
            break  # one died while the others were being found: go on at once
    dead = _cause(session, _exited(fds))
    for fd in fds:
        os.close(fd)
    if dead and _fault(gen):
        _STATE["lost"] = COMPONENTS[dead]
        _interrupt(session, gen)


def _exited(fds: dict[int, str], timeout_ms: int | None = None) -> set[str]:
    """Wait (`timeout_ms`, or until one exits) for a pidfd to be readable (its process
    exited); the program names of those that exited by then."""
    if not fds:
        if timeout_ms is not None:
            time.sleep(timeout_ms / 1000)
        return set()
    poller = select.poll()
    for fd in fds:
        poller.register(fd, select.POLLIN)
    return {fds[fd] for fd, _ in poller.poll(timeout_ms)}


def _cause(session: str, ready: set[str]) -> str | None:
    """The one that died first: on a busy node the raylet has ended the other agent (and
    itself) before this thread runs, or before it found them all; its log says which agent
    it followed."""
    if ready:
        with contextlib.suppress(OSError):
            with open(os.path.join(session, "logs", "raylet.out"), "rb") as log:
                log.seek(max(0, os.fstat(log.fileno()).st_size - 65536))
                tail = log.read().decode(errors="replace")
            logged = [name for name, line in _LOGGED.items() if line in tail]
            if len(logged) == 1:
                return logged[0]
    return next((name for name in _ORDER if name in ready), None)


def _fault(gen: int) -> bool:
    """This watch is the current one, still armed, and Ray still connected (not an
    orderly shutdown under way)."""
    ray = sys.modules.get("ray")
    connected = ray is not None and getattr(ray, "is_initialized", lambda: False)()
    return _STATE["armed"] and _STATE["gen"] == gen and connected and \
        _STATE.get("pid") == os.getpid()


def _interrupt(session: str, gen: int) -> None:
    """Ctrl-C for the main thread; the process ended outright if it is alive `GRACE_S`
    later."""
    main = threading.main_thread()
    with contextlib.suppress(Exception):
        signal.pthread_kill(main.ident, signal.SIGINT)  # type: ignore[arg-type]
    time.sleep(GRACE_S)
    if not _fault(gen):
        return  # the exit path stopped Ray itself meanwhile
    with contextlib.suppress(Exception):
        (_STATE.get("on_exit") or (lambda: None))()
    text = line()
    if text:
        print(text, file=sys.stderr, flush=True)
    from alignflow.flows.ray import reap

    with contextlib.suppress(Exception):
        reap.reap(session, timeout=3.0)
    os._exit(EXIT_CODE)
