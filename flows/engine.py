"""The programming model: `@flow`, `@task`, `gather`, durable `sleep` and `wait_for`.

A flow is a plain function; calling a task inside a running flow hands the call to the
driver (`flows/control/driver.py`), which replays it from the journal or runs and commits it.
Outside a flow a task is a plain function call, so task code is testable without Ray.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import re
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from alignflow.flows.journal import codec
from alignflow.flows.journal.identity import source_hash
from alignflow.flows.lazyref import LazyRef

if TYPE_CHECKING:
    from alignflow.flows.seams import Driver

CODE_HASHES: dict[str, str] = {}  # task name -> code hash of the task defined most recently
_DRIVER: contextvars.ContextVar[Driver | None] = contextvars.ContextVar("alignflow_driver",
                                                                       default=None)
_SCOPES: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("alignflow_scopes",
                                                                         default=())
_SCOPE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def current_driver() -> Driver | None:
    """The driver running the current flow, or None outside a flow."""
    return _DRIVER.get()


@codec.register_type
@dataclasses.dataclass(frozen=True)
class TaskError:
    """What a `catch_exceptions=True` task returns instead of raising."""

    task_key: str
    type: str
    message: str
    kind: str = "user"


@dataclasses.dataclass(frozen=True)
class TaskOptions:
    version: int = 1
    key: str | None = None
    max_retries: int = 3
    retry_exceptions: bool = False
    catch_exceptions: bool = False
    cache: bool = False
    num_cpus: float = 1
    num_gpus: float = 0
    memory: int | None = None
    worker: str | None = None


class Done:
    """An already-resolved future: a replayed task, a call outside a flow, an attempt the
    inline executor ran. It answers both a flow's questions (`result`, `done`) and the
    driver's of an attempt (`wait`, `ready`)."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def result(self) -> Any:
        return self.value

    def done(self) -> bool:
        return True

    wait, ready = result, done


class Task:
    """A `@task` function. Call it, `.submit(...)` it, or `.options(key=...)` it."""

    def __init__(self, fn: Callable, opts: TaskOptions, code_hash: str | None = None) -> None:
        self.fn, self.opts, self.name = fn, opts, fn.__name__
        if code_hash is None:  # a named body is hashed from its text, unimported
            code_hash = fn.source_hash() if isinstance(fn, LazyRef) else source_hash(fn)
        self.code_hash = code_hash
        functools.update_wrapper(self, fn)
        CODE_HASHES[self.name] = self.code_hash

    def options(self, **changes: Any) -> Task:
        """A copy with some options changed, e.g. `gen.options(key=f"iter-{i:04d}/gen")(...)`."""
        return Task(self.fn, dataclasses.replace(self.opts, **changes), self.code_hash)

    def submit(self, *args: Any, **kwargs: Any) -> Any:
        """Start the task and return a future (`.result()`); independent tasks run concurrently."""
        driver = current_driver()
        if driver is None:
            return Done(self.fn(*args, **kwargs))
        return driver.submit(self, args, kwargs)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.submit(*args, **kwargs).result()

    def __repr__(self) -> str:
        return f"<task {self.name} v{self.opts.version}>"


def task(fn: Callable | str | None = None, *, version: int = 1, key: str | None = None,
         max_retries: int = 3, retry_exceptions: bool = False, catch_exceptions: bool = False,
         cache: bool = False, num_cpus: float = 1, num_gpus: float = 0,
         memory: int | None = None, worker: str | None = None) -> Any:
    """Declare a durable step. `worker="policy"`: runs in that worker group's actor, with the
    group's object as first argument. `fn` may be "module:function": a body the driver names
    without importing its module (`flows/lazyref.py`), imported where the task runs."""
    opts = TaskOptions(version, key, max_retries, retry_exceptions, catch_exceptions, cache,
                       num_cpus, num_gpus, memory, worker)
    if fn is None:
        return lambda f: Task(LazyRef(f) if isinstance(f, str) else f, opts)
    return Task(LazyRef(fn) if isinstance(fn, str) else fn, opts)


class Flow:
    """A `@flow` function. Calling it runs the body directly (inside another flow: a subflow
    sharing its journal); `alignflow.run(flow, cfg)` runs it durably."""

    def __init__(self, fn: Callable, name: str | None = None) -> None:
        self.fn, self.name = fn, name or fn.__name__
        functools.update_wrapper(self, fn)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __repr__(self) -> str:
        return f"<flow {self.name}>"


def flow(fn: Callable | None = None, *, name: str | None = None) -> Any:
    """Declare a flow: loops and branches are plain Python; tasks inside are journalled."""
    if fn is None:
        return lambda f: Flow(f, name)
    return Flow(fn, name)


@contextlib.contextmanager
def scope(name: str) -> Iterator[str]:
    """Name a part of a flow, e.g. one subflow of a pipeline: the task keys and worker groups
    inside get the prefix `name/` (`sft/export-0`), so two subflows in one run each keep
    their own keys, checkpoints and workers. Outside a scope nothing is prefixed, so the
    keys of a flow run on its own (and every store written so far) stay as they were.
    Scopes nest (`a/b/`); yields the prefix."""
    if not isinstance(name, str) or not _SCOPE_NAME.match(name):
        from alignflow.errors import FlowError

        raise FlowError(f"scope name {name!r}: expected letters, digits, '_', '.' or '-', "
                        "starting with a letter or digit")
    token = _SCOPES.set((*_SCOPES.get(), name))
    try:
        yield scope_prefix()
    finally:
        _SCOPES.reset(token)


def scope_prefix() -> str:
    """The prefix of the scopes entered so far ("" outside every scope)."""
    return "".join(f"{name}/" for name in _SCOPES.get())


def expect(iterations: int) -> None:
    """The flow says how many iterations it will run (once its data is loaded), so the
    progress display counts them and gives an ETA. A no-op outside a run."""
    driver = current_driver()
    progress = getattr(driver, "progress", None)
    if progress is not None and hasattr(progress, "expect"):
        progress.expect(iterations)


def gather(*futures: Any) -> list[Any]:
    """Wait for futures (from `task.submit`) and return their results in order."""
    return [f.result() for f in futures]


def wait_durable() -> None:
    """Wait until every finished task is committed, the checkpoints they write in the
    background included (`flows/journal/commit_queue.py`). Call it before another worker reads a
    checkpoint a task just returned: its output comes back before the files are written."""
    driver = current_driver()
    if driver is not None:
        driver.flush()


def sleep(seconds: float, *, key: str | None = None) -> None:
    """Durable sleep: the wake time is journalled, a restarted driver sleeps what is left."""
    driver = current_driver()
    if driver is None:
        time.sleep(seconds)
        return
    driver.durable_sleep(seconds, key)


def wait_for(event: str, timeout: float | None = None, *, key: str | None = None) -> Any:
    """Wait for `send_event(run_id, event, payload)`; returns the payload (None on timeout)."""
    driver = current_driver()
    if driver is None:
        from alignflow.errors import FlowError

        raise FlowError(f"wait_for({event!r}) needs a running flow; call it inside a @flow")
    return driver.wait_for(event, timeout, key)
