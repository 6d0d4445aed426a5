"""Joining Ray: in-process and lean (`flows/ray/local.py`), or a cluster at an address,
with its auth token and a quick probe so an unreachable address fails at once."""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator

from alignflow.errors import FlowError
from alignflow.flows import wrapper


def ensure_ray(address: str | None = None, *, quiet: bool = False) -> None:
    """Start Ray in-process, lean (`flows/ray/local.py`; never attaching to another local
    instance), or join `address`."""
    import ray

    if address is None:
        from alignflow.flows.ray import local as ray_local

        ray_local.start(quiet=quiet)
        return
    if ray.is_initialized():
        _check_same_cluster(address)
        return
    _join_cluster(address)
    if not quiet:
        print(f"alignflow: running on Ray cluster at {address}", file=sys.stderr)


_JOINED: set[str] = set()  # addresses this process joined


def _check_same_cluster(address: str) -> None:
    """This process already runs Ray: fine when it is the cluster asked for; otherwise one
    line (an unreachable address as such), never a silent run on another cluster."""
    import ray

    if address == "auto" or address in _JOINED:
        return
    current = ray.get_runtime_context().gcs_address
    if _same_endpoint(address, current):
        return
    _fail(address, _reach_error(address) or f"this process is already joined to the Ray "
          f"instance at {current!r} (call ray.shutdown() first, or use a new process)")


def _same_endpoint(address: str, gcs: str) -> bool:
    """Same port, and the same host or a loopback name for it (Ray reports the node's own
    address for a cluster joined at 127.0.0.1)."""
    import ipaddress
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    gcs_host, _, gcs_port = gcs.rpartition(":")
    if port != gcs_port:
        return False
    try:
        ip = socket.gethostbyname(host.strip("[]"))
    except OSError:
        return False
    return ip == gcs_host or ipaddress.ip_address(ip).is_loopback


def _reach_error(address: str) -> str | None:
    try:
        _probe(address)
    except OSError as exc:
        return wrapper.first_line(exc)
    return None


def _fail(address: str, why: str, cause: BaseException | None = None) -> None:
    err = FlowError(f"cannot connect to the Ray cluster at {address!r}: {why}; expected a "
                    "running cluster (`ray start --head`) and, if it uses token auth, its "
                    "token in $RAY_AUTH_TOKEN, $RAY_AUTH_TOKEN_PATH or ~/.ray/auth_token")
    err.kind = "system"
    raise err from cause


def _join_cluster(address: str) -> None:
    """`ray.init(address)`, with the cluster's auth token when one is at hand, or one line
    saying why the cluster cannot be joined (a closed port fails at once: Ray itself would
    wait minutes for a GCS that is not there)."""
    import logging

    import ray

    from alignflow.flows.lazyref import MODULES
    from alignflow.flows.ray import spares

    env = spares.runtime_env(tuple(sorted(MODULES)))  # supervised: warm spare processes
    for attempt in range(1, CLIENT_INIT_TRIES + 1):
        try:
            _probe(address)
            use_local_auth_token()
            with _own_sigterm():
                ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False,
                         runtime_env=env)
            _JOINED.add(address)
            return
        except ConnectionAbortedError as exc:  # the Ray Client server could not start ours
            if attempt == CLIENT_INIT_TRIES:
                _fail(address, _server_reason(exc), exc)
            print(f"alignflow: the Ray Client server at {address} could not start this "
                  f"client's session ({_server_reason(exc)}); trying again ({attempt} of "
                  f"{CLIENT_INIT_TRIES - 1})", file=sys.stderr, flush=True)
            time.sleep(CLIENT_INIT_PAUSE_S * attempt)
        except Exception as exc:
            _fail(address, wrapper.first_line(exc), exc)


# A Ray Client server starts one server process per client; on a busy head that start can
# fail or time out (seen in CI on 2 cores): a new connection gets a new process.
CLIENT_INIT_TRIES, CLIENT_INIT_PAUSE_S = 3, 2.0


def _server_reason(exc: BaseException) -> str:
    """The Ray Client server's own reason, which Ray puts below its first line (the last
    line of the server's traceback), or the first line when there is none."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[-1] if len(lines) > 1 else wrapper.first_line(exc)


@contextlib.contextmanager
def _own_sigterm() -> Iterator[None]:
    """`ray.init` takes SIGTERM over (`sys.exit`, then Ray's core aborts the process): a
    handler the command installed (a pod stop marks the run RESUMABLE and releases its
    lease, so the pod's retry continues at once) is put back once Ray is joined."""
    import signal
    import threading

    main = threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if callable(before):
            signal.signal(signal.SIGTERM, before)


def _probe(address: str, timeout: float = 5.0) -> None:
    """Open (and close) a TCP connection to `host:port` / `ray://host:port`; "auto" and
    addresses without a port are left to Ray."""
    import socket

    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout):
        pass


def use_local_auth_token() -> None:
    """Ray >= 2.59 turns token auth on for clusters started on a machine that has a token
    (`ray start --head` with ~/.ray/auth_token), but a client given an explicit address only
    uses a token when RAY_AUTH_MODE=token. Do what Ray does for `address="auto"`: with
    RAY_AUTH_MODE unset and a token in the environment or at the default path, send it.
    (A cluster without auth ignores it; RAY_AUTH_MODE=disabled opts out.)"""
    import logging

    try:
        from ray._private.authentication import authentication_token_setup as auth
    except ImportError:  # Ray < 2.52: no token auth
        return
    quiet = logging.getLogger(auth.__name__)
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # Ray's own notice is meant for its CLI
    try:
        auth.maybe_enable_token_auth_if_token_available(warn_if_disabled=False)
    finally:
        quiet.setLevel(level)


def connect(executor: str, address: str | None) -> None:
    """Join (or start) Ray now for the "ray" executor, so that a cluster that cannot be
    reached fails before any run metadata is written."""
    if executor == "ray":
        ensure_ray(address)
