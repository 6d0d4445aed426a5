"""Where task attempts run: in the driver process ("inline") or on Ray Core ("ray").

Both take the same call payload and hand back the wrapper's result dict; a handle's `wait()`
raises only for faults outside user code (a dead Ray worker or actor), which the driver
retries. Worker groups (stateful actors, `flows/ray/worker_host.py`) live here too, one object
per group.
"""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any

from alignflow import detached
from alignflow.artifacts.redact import redact
from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError
from alignflow.flows import wrapper
from alignflow.flows.engine import Done
from alignflow.flows.ray import adopt as adoption
from alignflow.flows.ray.connect import ensure_ray
from alignflow.flows.ray.groups import RayWorkerGroup, group_size
from alignflow.flows.ray.worker_host import WorkerHost, host_actor_class
from alignflow.timeline import mark

_REMOTES: dict[str, Any] = {}


class _Later:
    def __init__(self, fn: Any, ready: Any) -> None:
        self.wait, self.ready = fn, ready


class InlineExecutor:
    """Runs each attempt synchronously in this process; worker objects live in a dict."""

    name = "inline"

    def __init__(self) -> None:
        self.workers: dict[str, Any] = {}

    def start_worker(self, name: str, factory: Any, options: dict, run_id: str,
                     adopt: bool = False) -> None:
        if group_size(options) > 1:
            from alignflow.errors import FlowError

            raise FlowError(f"worker group {name!r} has {group_size(options)} workers; "
                            "data-parallel groups need the ray executor (--executor ray)")
        if name not in self.workers:
            self.workers[name] = WorkerHost(factory, name)

    def restart_worker(self, name: str, factory: Any, options: dict, run_id: str) -> None:
        self.workers[name] = WorkerHost(factory, name)

    def restore_worker(self, name: str, store: Store, checkpoint: str) -> None:
        self.workers[name].restore(store, checkpoint)

    def submit(self, call: dict, options: dict) -> Done:
        if call.get("worker"):
            return Done(self.workers[call["worker"]].call(call))
        return Done(wrapper.execute(call))

    def durable(self, worker: str, token: str) -> _Later:
        """A handle on a finished task's background work (`wrapper.durable`)."""
        return _Later(lambda: wrapper.durable(token), lambda: wrapper.settled(token))

    def shutdown(self) -> None:
        self.workers.clear()


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

    def __init__(self, address: str | None = None, warm: tuple[str, ...] = ()) -> None:
        import ray

        ensure_ray(address)
        _pickle_user_modules_by_value()
        if "execute" not in _REMOTES:  # defined once per process: Ray exports it once
            _REMOTES["execute"] = ray.remote(max_retries=0)(wrapper.execute)
        self._execute, self._actor_cls = _REMOTES["execute"], host_actor_class()
        self._variants: dict[tuple, Any] = {}
        self.workers: dict[str, Any] = {}
        self.run_id = ""
        self.pool = None
        if address is None:  # one machine: warm workers (`flows/ray/pool.py`)
            from alignflow.flows.ray import pool as ray_pool

            ray_pool.create(warm)
            self.pool = ray_pool

    def start_worker(self, name: str, factory: Any, options: dict, run_id: str,
                     adopt: bool = False) -> bool:
        """`adopt`: the group has a committed checkpoint, so live actors a dead driver of a
        supervised run left may be taken over (`flows/ray/adopt.py`); returns whether they were."""
        self.run_id = run_id
        if name in self.workers:
            return False
        if adopt and self._adopt(name, factory, options, run_id):
            return True
        plain = not options.get("num_gpus") and group_size(options) == 1
        pool = self.pool if plain else None
        actor = pool.take() if pool else None
        if pool is None or actor is None:
            self.restart_worker(name, factory, options, run_id)
            return False
        pool.track(actor, actor.install.remote(factory, name))
        self.workers[name] = actor
        return False

    def restart_worker(self, name: str, factory: Any, options: dict, run_id: str) -> None:
        import ray

        old = self.workers.pop(name, None)
        if isinstance(old, RayWorkerGroup):
            old.kill()
        elif old is not None:
            ray.kill(old, no_restart=True)
        if group_size(options) > 1:
            self.workers[name] = RayWorkerGroup(name, factory, options, run_id).start()
            return
        actor_name = f"alignflow:{run_id}:{name}"
        if adoption.supervised():
            detached.discard([actor_name])  # a dead driver's, not adopted: its name free
        self.workers[name] = self._actor_cls.options(
            name=actor_name, get_if_exists=True, **_remote_options(options),
            **adoption.actor_options()).remote(factory, name,
                                               adoption.group_name(run_id, name))

    def _adopt(self, name: str, factory: Any, options: dict, run_id: str) -> bool:
        """Take over the live actors a dead driver of this run left (supervised runs)."""
        if group_size(options) > 1:
            group = RayWorkerGroup(name, factory, options, run_id).adopt()
            if group is not None:
                self.workers[name] = group
            return group is not None
        actor = adoption.adopt_actor(f"alignflow:{run_id}:{name}")
        if actor is not None:
            self.workers[name] = actor
        return actor is not None

    def restore_worker(self, name: str, store: Store, checkpoint: str) -> None:
        import ray

        worker = self.workers[name]
        if isinstance(worker, RayWorkerGroup):
            worker.restore(store, checkpoint)
        else:
            ray.get(worker.restore.remote(store, checkpoint))

    def submit(self, call: dict, options: dict) -> Any:
        actor = self.workers[call["worker"]] if call.get("worker") else None
        if isinstance(actor, RayWorkerGroup):
            return actor.submit(call)
        if actor is None and self.pool and not options.get("num_gpus"):
            actor = self.pool.idle()  # a plain task: on a warm, idle pool process
        if actor is not None:
            ref = actor.call.remote(call)
            if self.pool:
                self.pool.track(actor, ref)
            return _RayHandle(ref)
        opts = _remote_options(options)
        key = tuple(sorted(opts.items()))
        if key not in self._variants:  # `.options()` rebuilds the remote function each call
            self._variants[key] = self._execute.options(**opts)
        return _RayHandle(self._variants[key].remote(call))

    def durable(self, worker: str, token: str) -> _RayHandle:
        """Waits on the worker's side thread, beside the tasks that run meanwhile."""
        actor = self.workers[worker]
        if isinstance(actor, RayWorkerGroup):
            return _RayHandle(actor.durable(token))
        return _RayHandle(actor.durable.remote(token))

    def shutdown(self) -> None:
        import ray

        for actor in self.workers.values():
            if isinstance(actor, RayWorkerGroup):
                actor.kill()
            else:
                ray.kill(actor, no_restart=True)
        self.workers.clear()
        if adoption.supervised() and self.run_id:
            detached.sweep(self.run_id)  # the helpers its workers left detached (engines)
        if self.pool:
            self.pool.close()


@contextlib.contextmanager
def joined(kind: str, address: str | None, warm: tuple[str, ...],
           store: Store) -> Iterator[InlineExecutor | RayExecutor]:
    """The executor of one drive, shut down when the drive ends; `store`: the run's
    (a store in this process's memory is refused on Ray, whose workers cannot see it)."""
    check_executor(store, kind)
    executor = make_executor(kind, address, warm)
    try:
        yield executor
    finally:
        executor.shutdown()
        mark("executor closed")


def check_executor(store: Store, executor: str) -> None:
    """A `memory://` store lives in this process only: Ray workers would each see an empty
    one, so it is refused there, before anything is written."""
    if executor == "ray" and getattr(store, "protocol", None) == "memory":
        raise ConfigError(f"store {store.url} is in this process's memory, which Ray workers "
                          "cannot see; use --executor inline, a local path or s3://")


def make_executor(kind: str, address: str | None = None,
                  warm: tuple[str, ...] = ()) -> InlineExecutor | RayExecutor:
    """`warm`: modules the Ray workers should import at once (the flow's)."""
    if kind == "inline":
        return InlineExecutor()
    if kind == "ray":
        return RayExecutor(address, warm)
    raise ConfigError(f"executor {kind!r}: expected 'ray' or 'inline'")


def is_transient(exc: BaseException) -> bool:
    """Faults outside user code that a retry can fix: dead Ray workers/actors, timeouts."""
    return isinstance(exc, _ray_faults() + wrapper.TRANSIENT)


def _ray_faults() -> tuple:
    try:
        from ray import exceptions as rex
    except ImportError:
        return ()
    return (rex.WorkerCrashedError, rex.RayActorError, rex.ObjectLostError, rex.NodeDiedError,
            rex.GetTimeoutError)


def fault_record(exc: BaseException, worker: str | None) -> dict:
    """The error record of a fault outside user code. A dead Ray process is named with its
    exit code when Ray knows it (`sys.exit` in a task is caught before the process dies)."""
    record: dict[str, str | None] = {"type": type(exc).__name__, "kind": "system",
                                     "message": wrapper.first_line(exc)}
    if not isinstance(exc, _ray_faults()) or type(exc).__name__ == "GetTimeoutError":
        return record
    text = str(exc)
    who = f"the Ray actor of worker group {worker!r}" if worker else "its Ray worker process"
    pid = re.search(r"\bpid: (\d+)", text)
    code = re.search(r"exit code (-?\d+)", text)
    record["message"] = redact(
        f"{who}{f' (pid {pid.group(1)})' if pid else ''} died, "
        + (f"exit code {code.group(1)}" if code else "exit code unknown (killed by a signal, "
           "the OOM killer, or os._exit)"))
    return record
