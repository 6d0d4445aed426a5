"""Find the flow a run names: a built-in name, `path/to/file.py:function` or `module:function`.

The run records this reference (not the code), so resume imports the *current* code.
Files loaded by path are pickled by value for Ray workers, which cannot import them by name.
"""

from __future__ import annotations

import inspect
import os
import sys
import typing
from typing import Any

from alignflow.artifacts import usercode
from alignflow.errors import ConfigError, FlowError
from alignflow.flows import registry
from alignflow.flows.engine import Flow
from alignflow.flows.seams import FlowConfig


def _import_attr(target: str, builtin: bool = False) -> Any:
    """`module:attr`: alignflow's own (`builtin`), or one this process allows
    (`artifacts/usercode.py`: named by the user, never by a store)."""
    module_name, _, attr = target.partition(":")
    try:
        obj = usercode.import_attr(target, builtin=builtin)
    except ImportError as exc:
        raise FlowError(f"flow {target!r}: cannot import module {module_name!r} ({exc})") from None
    if obj is None:
        raise FlowError(f"flow {target!r}: module {module_name!r} has no {attr!r}")
    return obj


def _load_file(path: str, attr: str, fresh: bool) -> Any:
    """A flow file's `attr`, imported from the allowed bytes (`fresh`: read again, since
    resume runs the code on disk now)."""
    if not os.path.isfile(path):
        raise ConfigError(f"flow file {path!r} not found; expected path/to/file.py:function")
    name = usercode.module_name_for(path)
    if not fresh and name in sys.modules:
        return getattr(sys.modules[name], attr, None) or _missing(path, attr)
    return usercode.load_attr(path, attr, kind="user", what="flow file") or _missing(path, attr)


def _missing(path: str, attr: str) -> Any:
    raise ConfigError(f"flow file {path!r} defines no {attr!r}; expected path/to/file.py:function")


def _as_flow(obj: Any, ref: str) -> Flow:
    if isinstance(obj, Flow):
        return obj
    if callable(obj):
        return Flow(obj)
    raise FlowError(f"flow {ref!r} is a {type(obj).__name__}, expected a @flow function")


def canonical_ref(ref: str) -> str:
    """Built-in names stay; file paths become absolute so resume works from any directory."""
    path, sep, attr = ref.rpartition(":")
    if sep and path.endswith(".py"):
        return f"{os.path.abspath(path)}:{attr}"
    return ref


def load_flow(ref: str, fresh: bool = False, *, named: bool = False) -> tuple[Flow, type | None]:
    """(flow, its config class or None) for a flow reference; `fresh` re-reads a flow file
    (resume runs the code on disk now). A flow outside alignflow loads only when this
    process allows it (`artifacts/usercode.py`); `named=True` says the user named `ref`
    here (a command line, a Python call), which allows it. Never pass a store's text as
    `named`: `flows/trust/` decides what a stored run may load."""
    if ref in registry.BUILTIN:
        target, cfg = registry.BUILTIN[ref]
        flow = _as_flow(_import_attr(target, builtin=True), ref)
        return flow, _import_attr(cfg, builtin=True) if cfg else config_class(flow)
    path, sep, attr = ref.rpartition(":")
    if sep and path.endswith(".py"):
        if named:
            allow_named(path)
        flow = _as_flow(_load_file(path, attr, fresh), ref)
    elif sep and path:
        if named:
            usercode.grant(usercode.current() | usercode.Allowances(modules=frozenset({ref})))
        flow = _as_flow(_import_attr(ref), ref)
    else:
        known = ", ".join(registry.names()) or "none registered yet"
        raise ConfigError(f"unknown flow {ref!r}; expected a built-in flow ({known}) or "
                          "path/to/file.py:function")
    return flow, config_class(flow)


def config_class_of(ref: str) -> type:
    """The config class of a flow that has one (the built-in flows'); `ConfigError` else."""
    _fn, cls = load_flow(ref)
    if cls is None:
        raise ConfigError(f"flow {ref!r} takes no config class; expected a built-in flow")
    return cls


def allow_named(path: str) -> None:
    """Allow the code file the user named here, as it is now."""
    digest = usercode.sha256_of(path)
    if digest is not None:
        extra = usercode.Allowances({usercode.resolved(path): digest})
        usercode.grant(usercode.current() | extra)


def ref_of(flow: Flow) -> str:
    """The reference that re-imports `flow` (for runs started from Python)."""
    for name, (target, _cfg) in registry.BUILTIN.items():
        if target == f"{flow.fn.__module__}:{flow.fn.__qualname__}":
            return name
    module = sys.modules.get(flow.fn.__module__)
    if flow.fn.__module__ == "__main__" or flow.fn.__module__.startswith("alignflow_user_"):
        return f"{os.path.abspath(inspect.getsourcefile(flow.fn) or '')}:{flow.fn.__qualname__}"
    if module is None:
        raise FlowError(f"flow {flow.name!r}: cannot tell how to re-import it for resume")
    return f"{flow.fn.__module__}:{flow.fn.__qualname__}"


def builtin_name(ref: str, config: FlowConfig) -> str | None:
    """The registered name of a built-in run: `dr_grpo`, `rloo`, ... share `grpo`'s function,
    so the config's class tells them apart (None for flows that are not built in)."""
    if ref not in registry.BUILTIN:
        return None
    target, own = registry.BUILTIN[ref]
    cls = f"{type(config).__module__}:{type(config).__qualname__}"
    if own == cls:
        return ref
    same = [n for n, (t, c) in registry.BUILTIN.items() if t == target and c == cls]
    return same[0] if same else ref


def config_class(flow: Flow) -> type | None:
    """The class annotated on the flow's first parameter (None: plain dict config)."""
    params = list(inspect.signature(flow.fn).parameters.values())
    if not params:
        return None
    try:
        hint = typing.get_type_hints(flow.fn).get(params[0].name)
    except Exception:
        return None
    return hint if isinstance(hint, type) and hint is not dict else None
