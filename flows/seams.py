"""The engine's seams written down: the handles values pass through between its folders.

Readers and the type checker (`make test`, mypy strict here) follow a value across these
instead of stopping at `Any`:
- `Driver`: what a flow body reaches through `flows/engine.py:current_driver()` (the one in
  `flows/control/driver.py` satisfies it); `Future` is what `Task.submit` hands back.
- `ProgressSink`: the progress display a driver reports to (`flows/cli/progress.py`).
- `StoreArg`: how the public edge names a store (`Store | str | None`); `store_of` resolves
  it once, and every engine signature below the edge takes a `Store`.
- `FlowConfig`: the config the engine carries, journalled by the codec (a built-in flow's
  also makes its run plan: `flows/control/planning.py:Planned`).
The rollout source (`flows/rl/rollouts.py:RolloutSource`) and the run request
(`flows/cli/request.py:RunRequest`) live with their families.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Protocol, TypeAlias, runtime_checkable

from alignflow.artifacts.store import Store, open_store

StoreArg: TypeAlias = Store | str | None


def store_of(store: StoreArg) -> Store:
    """The public edge's store argument as a `Store` (None: $ALIGNFLOW_STORE / default)."""
    return open_store(store)


class Future(Protocol):
    """A submitted task's result on its way (`engine.Done` or a driver's live future)."""

    def result(self) -> Any:
        """The task's output, waiting for it."""

    def done(self) -> bool:
        """Whether `result()` returns at once."""


class ProgressSink(Protocol):
    """What a driver tells the progress display (`flows/cli/progress.py:Progress`)."""

    clock: Callable[[], float]  # the display's clock (monotonic seconds)
    running: dict[str, float]  # running task key -> when it started (by `clock`)

    def expect(self, iterations: int) -> None:
        """The flow will run `iterations` iterations (for the ETA)."""

    def task_started(self, task_key: str, iteration: int | None = None) -> None:
        """A task began running."""

    def task_finished(self, task_key: str, duration: float, cached: bool = False, *,
                      status: str = "SUCCESSFUL", output: Any = None) -> None:
        """A task ended (`cached`: replayed from the journal; `output`: its JSON record)."""

    def log(self, msg: str) -> None:
        """One line for the user."""

    def start_run(self, run_id: str, flow: str, total_iterations: int | None = None,
                  sink: Any = None) -> None:
        """A drive of the run began (`sink`: where heartbeat lines also go)."""

    def heartbeat(self, beats: dict[str, dict[str, Any]]) -> None:
        """How long each running task has run and how far it is."""

    def close(self, status: str | None = None) -> None:
        """The summary line for the run's final `status`."""


@runtime_checkable
class Driver(Protocol):
    """What `Task.submit`, `sleep`, `wait_for`, `wait_durable`, `expect`, `worker_group` and
    `planning.current` need of the driver running the flow."""

    progress: ProgressSink | None
    plan: Any  # `planning.Plan | None`; a Protocol attribute cannot narrow a mutable field

    def submit(self, task: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Future:
        """Replay `task`'s journalled result or run it; returns its future."""

    def durable_sleep(self, seconds: float, key: str | None) -> None:
        """Sleep with the wake time journalled."""

    def wait_for(self, event: str, timeout: float | None, key: str | None) -> Any:
        """The payload of `send_event(run_id, event, payload)`; None on timeout."""

    def flush(self) -> None:
        """Wait until every finished task is committed."""

    def add_worker_group(self, name: str, factory: Callable[[], Any],
                         options: dict[str, Any]) -> None:
        """Declare a worker group the flow's tasks run on."""


@runtime_checkable
class DataclassConfig(Protocol):
    """A config the codec journals field by field (every built-in flow's)."""

    __dataclass_fields__: ClassVar[dict[str, Any]]


FlowConfig: TypeAlias = DataclassConfig | Mapping[str, Any] | None
"""What a run's config may be: a dataclass, a mapping (user flows) or none."""

FlowOutput: TypeAlias = Any
"""What a flow returns (JSON values and journalled records, decoded): its caller's to read,
so it stays dynamic rather than `object` every caller would have to cast."""
