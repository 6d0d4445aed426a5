"""Where task attempts run: in the driver process ("inline") or on Ray Core ("ray").

Both take the same call payload and hand back the wrapper's result dict; a handle's `wait()`
raises only for faults outside user code (a dead Ray worker or actor), which the driver
retries. Worker groups (stateful actors) live here too, one object per group.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from alignflow.flows import wrapper

RAY_TEMP_DIR = "/tmp/alignflow-ray"
_REMOTES: dict[str, Any] = {}


class _Done:
    def __init__(self, value: Any) -> None:
        self.value = value

    def wait(self) -> dict:
        return self.value

    def ready(self) -> bool:
        return True


class InlineExecutor:
    """Runs each attempt synchronously in this process; worker objects live in a dict."""

    name = "inline"

    def __init__(self) -> None:
        self.workers: dict[str, Any] = {}

    def start_worker(self, name: str, factory: Any, options: dict, run_id: str) -> None:
        if name not in self.workers:
            self.workers[name] = factory()

    def restart_worker(self, name: str, factory: Any, options: dict, run_id: str) -> None:
        self.workers[name] = factory()

    def restore_worker(self, name: str, store: Any, checkpoint: str) -> None:
        self.workers[name].restore(store, checkpoint)

    def submit(self, call: dict, options: dict) -> _Done:
        obj = self.workers[call["worker"]] if call.get("worker") else None
        return _Done(wrapper.execute(call, obj))

    def shutdown(self) -> None:
        self.workers.clear()


def ensure_ray(address: str | None = None, *, quiet: bool = False) -> None:
    """Start Ray in-process (never attaching to another local instance) or join `address`."""
    import logging

    import ray

    if ray.is_initialized():
        return
    if address is None:
        ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False,
                 _temp_dir=RAY_TEMP_DIR, logging_level=logging.ERROR, log_to_driver=False,
                 configure_logging=True)
        where = f"in-process Ray ({os.cpu_count()} CPUs, temp {RAY_TEMP_DIR})"
    else:
        ray.init(address=address, logging_level=logging.WARNING, log_to_driver=False)
        where = f"Ray cluster at {address}"
    if not quiet:
        print(f"alignflow: running on {where}", file=sys.stderr)


def _remote_options(options: dict) -> dict:
    out = {"num_cpus": options.get("num_cpus", 1), "num_gpus": options.get("num_gpus", 0)}
    if options.get("memory"):
        out["memory"] = options["memory"]
    return out


def _pickle_user_modules_by_value() -> None:
    """Flow files loaded by path cannot be imported by name in Ray workers: ship them."""
    from ray import cloudpickle

    for name, module in list(sys.modules.items()):
        if name.startswith("alignflow_user_"):
            cloudpickle.register_pickle_by_value(module)


class _RayHandle:
    def __init__(self, ref: Any) -> None:
        self.ref = ref

    def wait(self) -> dict:
        import ray

        return ray.get(self.ref)

    def ready(self) -> bool:
        import ray

        done, _ = ray.wait([self.ref], timeout=0)
        return bool(done)


class RayExecutor:
    """Each attempt is a Ray task (or an actor call for worker tasks); Ray retries nothing."""

    name = "ray"

    def __init__(self, address: str | None = None) -> None:
        import ray

        ensure_ray(address)
        _pickle_user_modules_by_value()
        if not _REMOTES:  # defined once per process: Ray exports a remote function once
            _REMOTES["execute"] = ray.remote(max_retries=0)(wrapper.execute)
            _REMOTES["host"] = ray.remote(max_restarts=0, max_task_retries=0)(WorkerHost)
        self._execute, self._actor_cls = _REMOTES["execute"], _REMOTES["host"]
        self._variants: dict[tuple, Any] = {}
        self.workers: dict[str, Any] = {}

    def start_worker(self, name: str, factory: Any, options: dict, run_id: str) -> None:
        if name not in self.workers:
            self.restart_worker(name, factory, options, run_id)

    def restart_worker(self, name: str, factory: Any, options: dict, run_id: str) -> None:
        import ray

        old = self.workers.pop(name, None)
        if old is not None:
            ray.kill(old, no_restart=True)
        actor_name = f"alignflow:{run_id}:{name}"
        self.workers[name] = self._actor_cls.options(
            name=actor_name, get_if_exists=True, **_remote_options(options)).remote(factory)

    def restore_worker(self, name: str, store: Any, checkpoint: str) -> None:
        import ray

        ray.get(self.workers[name].restore.remote(store, checkpoint))

    def submit(self, call: dict, options: dict) -> _RayHandle:
        if call.get("worker"):
            return _RayHandle(self.workers[call["worker"]].call.remote(call))
        opts = _remote_options(options)
        key = tuple(sorted(opts.items()))
        if key not in self._variants:  # `.options()` rebuilds the remote function each call
            self._variants[key] = self._execute.options(**opts)
        return _RayHandle(self._variants[key].remote(call))

    def shutdown(self) -> None:
        import ray

        for actor in self.workers.values():
            ray.kill(actor, no_restart=True)
        self.workers.clear()


class WorkerHost:
    """The body of a worker-group actor: holds `factory()` and runs worker tasks on it."""

    def __init__(self, factory: Any) -> None:
        self.obj = factory()

    def call(self, call: dict) -> dict:
        return wrapper.execute(call, self.obj)

    def restore(self, store: Any, checkpoint: str) -> None:
        self.obj.restore(store, checkpoint)

    def pid(self) -> int:
        return os.getpid()


def make_executor(kind: str, address: str | None = None) -> InlineExecutor | RayExecutor:
    if kind == "inline":
        return InlineExecutor()
    if kind == "ray":
        return RayExecutor(address)
    from alignflow.errors import ConfigError

    raise ConfigError(f"executor {kind!r}: expected 'ray' or 'inline'")


def is_transient(exc: BaseException) -> bool:
    """Faults outside user code that a retry can fix: dead Ray workers/actors, timeouts."""
    try:
        from ray import exceptions as rex

        ray_faults: tuple = (rex.WorkerCrashedError, rex.RayActorError, rex.ObjectLostError,
                             rex.NodeDiedError, rex.GetTimeoutError)
    except ImportError:
        ray_faults = ()
    return isinstance(exc, ray_faults + wrapper.TRANSIENT)
