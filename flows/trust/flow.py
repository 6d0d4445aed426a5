"""Loading the flow a stored run names, without ever running code the store names.

`run.json` says which flow a run was started with (`flow_ref`). Resume, `resume --all` and
`tick` load it only
- by its built-in name;
- from the flow the user names now (`--flow path.py:fn`, or `flow=` from Python), which
  must be the same function;
- from a `module:function` the resuming process has already imported (a Python caller that
  imported its own flow module), which must be a `@flow`;
- from a flow file this machine confirms (`check.py`: under a trusted directory with the
  hash the run recorded, or `--trust-store`).
The recorded reference is a hint to check against, never something to import.
"""

from __future__ import annotations

import sys
from typing import Any

from alignflow.artifacts import usercode
from alignflow.errors import FlowError
from alignflow.flows import registry
from alignflow.flows.config.refs import Reference
from alignflow.flows.engine import Flow
from alignflow.flows.loader import canonical_ref, config_class, load_flow
from alignflow.flows.trust.check import Context, check, untrusted
from alignflow.flows.trust.sayso import Sayso


def _given(run_id: str, ref: str, given: str) -> tuple[Flow, type | None]:
    flow, cls = load_flow(canonical_ref(given), fresh=True, named=True)
    if ref.rpartition(":")[2] != canonical_ref(given).rpartition(":")[2]:
        raise FlowError(f"run {run_id!r} was started with flow {ref!r}; --flow {given!r} is "
                        "another function (give the flow the run was started with)")
    return flow, cls


def imported_flow(ref: str) -> Flow | None:
    """The `@flow` at `module:attr` when this process has already imported that module."""
    module, sep, attr = ref.partition(":")
    obj: Any = sys.modules.get(module) if sep else None
    for part in attr.split(".") if obj is not None else []:
        obj = getattr(obj, part, None)
    return obj if isinstance(obj, Flow) else None


def stored_flow(meta: dict, given: Flow | str | None, sayso: Sayso,
                ctx: Context) -> tuple[Flow, type | None, usercode.Allowances]:
    """(flow, config class, the flow file it may run) of a stored run, loaded only with
    this machine's say-so."""
    run_id, ref, none = ctx.run_id, str(meta.get("flow_ref", "")), usercode.Allowances()
    if isinstance(given, Flow):
        if ref.rpartition(":")[2] not in (given.fn.__qualname__, ref) and ref != given.name:
            raise FlowError(f"run {run_id!r} was started with flow {ref!r}, not {given.name!r}")
        return given, config_class(given), none
    if given is not None:
        return (*_given(run_id, ref, given), usercode.current())
    if ref in registry.BUILTIN:
        return (*load_flow(ref), none)
    found = imported_flow(ref)
    if found is not None:
        return found, config_class(found), none
    path, sep, _attr = ref.rpartition(":")
    if not (sep and path.endswith(".py")):
        raise untrusted(run_id, [f"it was started with flow {ref!r}, which is neither a "
                                 "built-in flow nor a @flow this process imported; alignflow "
                                 "never imports code a store names: resume it with --flow "
                                 f"{ref if sep else 'PATH.py:FUNCTION'}"])
    allowed = check([Reference("flow_ref", "flow", ref)], sayso, ctx)
    with usercode.allowing(allowed):
        return (*load_flow(ref, fresh=True), allowed)
