"""The driver's worker groups: declared by the flow, restored from their newest checkpoint
before first use, replaced when their process dies (a part of `driver.py`'s `Driver`)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from alignflow.artifacts import usercode
from alignflow.errors import FlowError
from alignflow.flows.ray.executors import fault_record, is_transient

if TYPE_CHECKING:
    from alignflow.artifacts.store import Store
    from alignflow.flows.seams import ProgressSink


class WorkerGroups:
    """Mixed into `Driver`: uses its executor, store, journal, progress and `_charge`."""

    if TYPE_CHECKING:  # what it uses of the `Driver` it is mixed into
        store: Store
        run_id: str
        executor: Any  # `flows/ray/executors.py`: InlineExecutor | RayExecutor
        progress: ProgressSink | None
        manifests: dict[str, dict]
        groups: dict[str, tuple[Any, dict]]
        announced: set[str]
        restored: set[str]
        latest_ckpt: dict[str, str]
        incarnations: Counter[str | None]  # None: a plain task (no group) reads 0

        def _charge(self, err: dict, worker: str | None, key: str) -> None: ...

        def flush(self) -> None: ...

    def add_worker_group(self, name: str, factory: Any, options: dict) -> None:
        factory = usercode.carrying(factory)  # the group's process may run what this one may
        self.groups[name] = (factory, options)
        trained = any(m.get("worker") == name and m.get("checkpoint")
                      for m in self.manifests.values())  # restored before use: adoptable
        kept = bool(options.get("immutable"))  # nothing in it changes: adoptable as it is
        if self.executor.start_worker(name, factory, options, self.run_id,
                                      adopt=trained or kept) and self.progress is not None:
            how = "restored from its newest checkpoint before its next task" if trained else \
                "immutable: kept as it was built"
            self.progress.log(f"host {name}: taken over from the dead driver ({how})")
        if self.progress is not None and options.get("label") and name not in self.announced:
            self.progress.log(f"host {name}: {options['label']}")
            self.announced.add(name)

    def _prepare_worker(self, name: str, key: str) -> None:
        if name not in self.groups:
            raise FlowError(f"task {key!r} runs on worker {name!r}, but the flow declared no "
                            f"worker_group({name!r}, factory) before it")
        if name not in self.restored and name in self.latest_ckpt:
            self._restore(name, key)
        self.restored.add(name)

    def _restore(self, name: str, key: str, tries: int = 3) -> None:
        """Restore `name` from its newest checkpoint. Engines found dead on the way were
        restarted by the host: restore again; a worker whose process died: replace it."""
        for attempt in range(1, tries + 1):
            try:
                return self.executor.restore_worker(name, self.store, self.latest_ckpt[name])
            except Exception as exc:
                cause = getattr(exc, "cause", None) or exc  # a Ray error wraps the real one
                engines = type(cause).__name__ == "EngineError"
                if attempt == tries or not (engines or is_transient(exc)):
                    raise
                if engines:
                    self._charge(fault_record(cause, name), name, key)
                    continue
                return self._restart_worker(
                    name, charge=partial(self._charge, fault_record(exc, name), name, key))

    def _restart_worker(self, name: str, seen: int | None = None,
                        charge: Callable[[], object] | None = None) -> None:
        """Replace `name`, whose process died under an attempt launched on its incarnation
        `seen` (default: the current one), unless committing what is done replaced it
        since (`redo.py`, which charged the recovery): it then stands restored to the
        newest state already. `charge` counts the replacement (`Driver._charge`)."""
        seen = self.incarnations[name] if seen is None else seen
        self.flush()  # the new worker restores the newest checkpoint: commit what is done
        if self.incarnations[name] == seen:
            if charge is not None:
                charge()
            self.replace_worker(name)

    def replace_worker(self, name: str) -> None:
        """A new process for worker group `name`, restored from its newest checkpoint."""
        factory, options = self.groups[name]
        self.executor.restart_worker(name, factory, options, self.run_id)
        self.incarnations[name] += 1
        if name in self.latest_ckpt:
            self.executor.restore_worker(name, self.store, self.latest_ckpt[name])
