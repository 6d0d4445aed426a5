"""Loading the flow a stored run names, without ever running code the store names.

A store is data: `run.json` says which flow a run was started with (`flow_ref`) and what
its config holds, and whoever can write the store can write anything there. So resume,
`resume --all` and `tick` import a flow only
- by its built-in name;
- from the flow the user names now (`--flow path.py:fn`, or `flow=` from Python), checked
  against the recorded reference;
- from a `module:function` the resuming process has already imported (a Python caller
  that imported its own flow module), which must be a `@flow`;
- from a flow file inside a directory the user trusts (`--trust DIR`, or
  `$ALIGNFLOW_TRUSTED_DIRS`, separated by the OS path separator).
Code files a stored config names (a `.py` reward function) must lie in a trusted place
too. The recorded reference is a hint to check against, never something to import.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from alignflow.errors import FlowError
from alignflow.flows import registry
from alignflow.flows.engine import Flow
from alignflow.flows.loader import canonical_ref, config_class, load_flow

ENV = "ALIGNFLOW_TRUSTED_DIRS"


def trusted_places(extra: Iterable[str] = ()) -> list[Path]:
    """Directories (and files) the user trusts: `--trust` items and `$ALIGNFLOW_TRUSTED_DIRS`."""
    env = [p for p in os.environ.get(ENV, "").split(os.pathsep) if p]
    return [Path(p).expanduser().resolve() for p in [*extra, *env]]


def _trusted(path: str, places: list[Path]) -> bool:
    target = Path(path).expanduser().resolve()
    return any(target == p or p in target.parents for p in places)


def _refuse(run_id: str, ref: str, why: str) -> FlowError:
    return FlowError(f"run {run_id!r} was started with flow {ref!r}, which {why}; alignflow "
                     "never imports code a store names: resume it with --flow "
                     f"{ref if ':' in ref else 'PATH.py:FUNCTION'} (or --trust DIR, "
                     f"${ENV})")


def _given(run_id: str, ref: str, given: str) -> tuple[Flow, type | None]:
    flow, cls = load_flow(canonical_ref(given), fresh=True)
    if ref.rpartition(":")[2] != canonical_ref(given).rpartition(":")[2]:
        raise FlowError(f"run {run_id!r} was started with flow {ref!r}; --flow {given!r} is "
                        "another function (give the flow the run was started with)")
    return flow, cls


def _imported(ref: str) -> Any:
    module, _, attr = ref.partition(":")
    obj: Any = sys.modules.get(module)
    for part in attr.split(".") if obj is not None else []:
        obj = getattr(obj, part, None)
    return obj


def stored_flow(run_id: str, ref: str, *, given: str | None = None,
                trust: Iterable[str] = ()) -> tuple[Flow, type | None]:
    """(flow, config class) of a stored run, loaded only from a place the user trusts."""
    if given is not None:
        return _given(run_id, ref, given)
    if ref in registry.BUILTIN:
        return load_flow(ref)
    path, sep, _attr = ref.rpartition(":")
    if sep and path.endswith(".py"):
        if _trusted(path, trusted_places(trust)):
            return load_flow(ref, fresh=True)
        raise _refuse(run_id, ref, "is a file outside the trusted directories")
    obj = _imported(ref) if sep else None
    if isinstance(obj, Flow):
        return obj, config_class(obj)
    raise _refuse(run_id, ref, "is neither a built-in flow nor a @flow this process imported")


def code_files(data: Any) -> list[str]:
    """Local `.py` files a config names (a reward function `name=path.py`, or a flow
    `path.py:function` that a campaign runs)."""
    if isinstance(data, dict):
        return [f for v in data.values() for f in code_files(v)]
    if isinstance(data, list | tuple):
        return [f for v in data for f in code_files(v)]
    if isinstance(data, str) and "://" not in data:
        path = data.partition("=")[2] or data if "=" in data else data
        if path.endswith(".py"):
            return [path]
        file, sep, attr = path.rpartition(":")  # a flow named as path/to/flow.py:function
        if sep and file.endswith(".py") and attr.isidentifier():
            return [file]
    return []


def check_code_files(run_id: str, data: Any, trust: Iterable[str] = (),
                     flow_file: str | None = None) -> None:
    """Every code file the stored config names must be trusted (or beside the named flow)."""
    places = trusted_places(trust)
    if flow_file:
        places.append(Path(flow_file).resolve().parent)
    for path in code_files(data):
        if not _trusted(path, places):
            raise FlowError(f"run {run_id!r}: its config names code file {path!r}, outside the "
                            f"trusted directories; alignflow never imports code a store names: "
                            f"resume with --trust {path} (or ${ENV})")
