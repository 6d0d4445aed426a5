"""A module-level callable named by "module:name" and imported where it is first called.

The driver of a Ray run only orchestrates: it names the task bodies and model-host classes
that run in workers, whose modules import torch and transformers. A `LazyRef` lets a flow
name them without importing them (`task(version=1)("alignflow.tasks.rl.learn:learn_actor")`,
`functools.partial(LazyRef("alignflow.tasks.steps.host:ModelHost"), spec)`): the task's
name and code hash are read from the source text, the same as the imported function's, so
journals written before keep their keys.
"""

from __future__ import annotations

import importlib
from typing import Any

from alignflow.errors import ConfigError

# The modules this process's refs name: a warm worker imports them ahead of its first task
# (`flows/ray/worker_host.py`), as it did when the flow module imported them itself.
MODULES: set[str] = set()


class LazyRef:
    """`module:name`, callable; pickles as its name, so a worker imports it, not the driver."""

    __slots__ = ("target", "_obj")

    def __init__(self, target: str) -> None:
        module, _, name = target.partition(":")
        if not module or not name.isidentifier():
            raise ConfigError(f"{target!r}: expected 'module:name'")
        self.target, self._obj = target, None
        MODULES.add(module)

    @property
    def __name__(self) -> str:
        return self.target.partition(":")[2]

    @property
    def module(self) -> str:
        return self.target.partition(":")[0]

    def resolve(self) -> Any:
        """The named object (imported on first use)."""
        if self._obj is None:
            self._obj = getattr(importlib.import_module(self.module), self.__name__)
        return self._obj

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.resolve()(*args, **kwargs)

    def source_hash(self) -> str:
        """`identity.source_hash` of the named function, read from its file unimported."""
        from alignflow.flows.journal.static_hashes import function_hash

        found = function_hash(self.module, self.__name__)
        if found is None:
            raise ConfigError(f"{self.target}: no module-level function of that name")
        return found

    def __reduce__(self) -> tuple:
        return LazyRef, (self.target,)

    def __repr__(self) -> str:
        return f"<lazy {self.target}>"
