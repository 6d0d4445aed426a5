"""The allow-list of user code this process may run, and the one loader of user code files.

A store is data, never code: a stored config may name a reward function, an agent file or a
flow, and whoever can write the store can write any name there. So nothing is imported
because a store names it. User code runs only through `load_file` (a `.py` file) and
`import_attr` (a `module:attr`), and both run only what this process was told to allow:
- a file by its resolved path *and* the sha256 of its bytes, so a file changed after the
  user allowed it (or swapped between the check and the import) is refused, and the bytes
  that were hashed are the bytes that run;
- a module reference by its exact `module:attr` text.
The allowances come from the user's own machine only: the command line, a locally trusted
directory, the local trust file, or code the user's Python process passes in
(`flows/trust.py` decides). Ray workers receive them with each task and worker group from
the driver (`carrying`), never from the store. With them travel the content hashes the
driver pinned for the models and data the run reads (`sources`: URL or Hub id -> sha256,
`artifacts/sources/`), so every node loads the bytes the run recorded or refuses.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import sys
import types
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from alignflow.artifacts.locations import real_path
from alignflow.errors import AlignflowError, Kind

_ALLOWED: dict[str, Any] = {"files": {}, "modules": frozenset(), "sources": {}}


class UntrustedCode(AlignflowError, PermissionError):
    """User code was about to run without the user's say-so on this machine."""

    kind: Kind = "user"


@dataclass(frozen=True)
class Allowances:
    """What may run: resolved file path -> sha256 of its bytes, and `module:attr` texts;
    and what may be loaded: source (URL, Hub id) -> the content sha256 the run pinned."""

    files: Mapping[str, str] = field(default_factory=dict)
    modules: frozenset[str] = frozenset()
    sources: Mapping[str, str] = field(default_factory=dict)

    def __or__(self, other: Allowances) -> Allowances:
        return Allowances({**self.files, **other.files}, self.modules | other.modules,
                          {**self.sources, **other.sources})


def resolved(path: str | Path) -> str:
    """The absolute, symlink-free path a file is allowed under (`locations.real_path`)."""
    return real_path(os.fspath(path))


def sha256_of(path: str | Path) -> str | None:
    """sha256 of a file's bytes, or None when it cannot be read as a regular file."""
    target = Path(path).expanduser()
    try:
        return hashlib.sha256(target.read_bytes()).hexdigest() if target.is_file() else None
    except OSError:
        return None


def for_files(*paths: str | Path) -> Allowances:
    """Allowances for these files as they are now (what naming them on a command line gives)."""
    found = {resolved(p): sha256_of(p) for p in paths}
    return Allowances({p: h for p, h in found.items() if h is not None})


def current() -> Allowances:
    """What this process may run now."""
    return Allowances(dict(_ALLOWED["files"]), _ALLOWED["modules"], dict(_ALLOWED["sources"]))


@contextlib.contextmanager
def allowing(extra: Allowances) -> Iterator[Allowances]:
    """Allow `extra` too while the block runs (a run, or a round run inside a campaign)."""
    before = current()
    grant(before | extra)
    try:
        yield current()
    finally:
        grant(before)


def grant(allowed: Allowances | None) -> None:
    """Set what this process may run (a Ray worker: what its driver allows)."""
    allowed = allowed or Allowances()
    _ALLOWED["files"], _ALLOWED["modules"] = dict(allowed.files), frozenset(allowed.modules)
    _ALLOWED["sources"] = dict(allowed.sources)


def pinned(source: str) -> str | None:
    """The content sha256 the running run pinned for `source` (None: not pinned here)."""
    return _ALLOWED["sources"].get(source)


def _refuse(what: str) -> UntrustedCode:
    return UntrustedCode(f"{what}: user code runs only with this machine's say-so (named on "
                         "the command line, under a --trust directory or $ALIGNFLOW_TRUSTED_DIRS"
                         ", or --trust-store for a store you own); a store naming it is not "
                         "enough")


def read_allowed(path: str | Path, what: str) -> tuple[str, bytes]:
    """(resolved path, its bytes) of an allowed file whose bytes still hash as allowed."""
    real = resolved(path)
    expected = _ALLOWED["files"].get(real)
    if expected is None:
        raise _refuse(f"{what} {real} is not allowed to run in this process")
    try:
        data = Path(real).read_bytes()
    except OSError as exc:
        raise UntrustedCode(f"{what} {real} cannot be read ({exc.strerror or exc})") from None
    if hashlib.sha256(data).hexdigest() != expected:
        raise _refuse(f"{what} {real} changed after it was allowed")
    return real, data


def load_file(path: str | Path, *, module_name: str, what: str = "code file",
              names: Mapping[str, types.ModuleType] | None = None) -> types.ModuleType:
    """Import an allowed `.py` file as `module_name` from the bytes that were checked.
    `names`: modules visible under those names while the file is imported (shims)."""
    real, data = read_allowed(path, what)
    module = types.ModuleType(module_name)
    module.__file__ = real
    saved = {k: sys.modules.get(k) for k in names or {}}
    sys.modules.update(names or {})
    sys.modules[module_name] = module  # dataclasses and pickle look a module up by name
    try:
        exec(compile(data, real, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(module_name, None)
        raise
    finally:
        for k, v in saved.items():
            sys.modules.pop(k, None) if v is None else sys.modules.__setitem__(k, v)
    return module


def module_name_for(path: str | Path, kind: str = "user") -> str:
    """The module a user file is imported as: `alignflow_<kind>_<stem>_<8 hex>`, stable
    from its absolute path (a flow file's record types are journalled under it)."""
    path = str(Path(path).resolve())
    return f"alignflow_{kind}_{Path(path).stem}_{hashlib.sha256(path.encode()).hexdigest()[:8]}"


def load_attr(path: str | Path, attr: str, *, kind: str, what: str,
              names: Mapping[str, types.ModuleType] | None = None) -> Any:
    """The one loader of user files (flows, agents, reward functions): `attr` of an
    allowed file (None when it defines none), imported under its module name (`kind`:
    user, agent, reward) from the bytes that were checked."""
    module = load_file(path, module_name=module_name_for(path, kind), what=what, names=names)
    return getattr(module, attr, None)


def import_attr(ref: str, *, builtin: bool = False) -> Any:
    """`module:attr` imported and looked up; only an allowed reference (or one of
    alignflow's own built-in targets, `builtin=True`, which no store can name)."""
    import importlib

    if not builtin and ref not in _ALLOWED["modules"]:
        raise _refuse(f"{ref!r} is not allowed to be imported in this process")
    module_name, _, attr = ref.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        obj = getattr(obj, part, None)
    return obj


class _Carrying:
    """A worker group's factory that first grants its driver's allowances (in a Ray actor)."""

    def __init__(self, factory: Callable[[], Any], allowed: Allowances) -> None:
        self.factory, self.allowed = factory, allowed

    def __call__(self) -> Any:
        grant(self.allowed)
        return self.factory()


def carrying(factory: Callable[[], Any]) -> Callable[[], Any]:
    """`factory` wrapped so that, wherever it is built, this process's allowances hold."""
    return _Carrying(factory, current())


def serve_calls(conn: Any, path: str, func_name: str, allowed: Allowances) -> None:
    """A child process's body: load an allowed file once, then answer `(seed, args)` calls
    of its `func_name` on `conn` until the pipe closes (`tasks/rewards/sandbox.py`). Lives
    here so the child imports nothing heavy before the user's file does."""
    import random
    import traceback

    grant(allowed)
    try:
        func = load_attr(path, func_name, kind="reward", what="reward function file")
        conn.send(("ready", callable(func)))
    except BaseException as exc:
        conn.send(("error", f"{type(exc).__name__}: {exc}"))
        return
    while True:
        try:
            seed, args = conn.recv()
        except EOFError:
            return
        random.seed(seed)  # the task's draws: the parent took `seed` from its own RNG
        for name in ("numpy.random", "torch"):
            module = sys.modules.get(name)
            if module is not None:
                (module.seed if name == "numpy.random" else module.manual_seed)(seed)
        try:
            conn.send(("ok", func(*args)))
        except BaseException as exc:
            conn.send(("error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
