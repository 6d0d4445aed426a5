"""A package whose names are imported on first use (PEP 562's module `__getattr__`).

Importing one torch-free module of a package (a config section, a name list) must not run
its `__init__`'s imports of the torch modules beside it: the Ray driver imports no torch
(issue 25). A package lists its names and the module each lives in; `exports` is its
`__getattr__`."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any


def exports(package: str, names: dict[str, str]) -> Callable[[str], Any]:
    """`package.__getattr__`: `names[attr]` is the submodule `attr` is imported from."""
    def __getattr__(name: str) -> Any:
        if name not in names:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        return getattr(importlib.import_module(f"{package}.{names[name]}"), name)
    return __getattr__
