"""The names records are journalled under: registered names, never where a class lives.

A store is data, never code. A journalled record says which class it is by a name, and the
decoder rebuilds only a class registered under that name (the allow-list in
`artifacts/journal.py`; alignflow's records register when their module is imported, a
flow's with `@alignflow.journal_record`). Names:
- alignflow's own records: `alignflow.<QualName>` — the class's name in the package, not
  its module, so moving a module changes no name and no journal. A class renamed keeps
  its journalled name by registering it explicitly (`journal_record(cls, "alignflow.Old")`).
- a flow's records: `<module>:<QualName>` of the module the flow file is loaded as (a
  script run as `__main__` is named after the module a resume loads it as), or the
  name the flow gives. The flow's module is the user's own namespace.
Two classes under one name are refused when a name is looked up. Stores written before
names read their module paths through `legacy_names.py`, once; a new store never does.
"""

from __future__ import annotations

import sys

from alignflow.artifacts import journal as allow_list
from alignflow.errors import FlowError

OWN = "alignflow."
_GIVEN: dict[type, str] = {}  # classes registered under a name of their own
_INDEX: dict[str, type] = {}
_INDEXED: list[tuple[int, ...]] = [()]  # the allow-list's classes `_INDEX` was built from


def module_of(cls: type) -> str:
    """`cls`'s module as a resume imports it (a script run as `__main__` is loaded as
    `usercode.module_name_for` of its file)."""
    module = cls.__module__
    main_file = getattr(sys.modules.get("__main__"), "__file__", None)
    if module == "__main__" and main_file:
        from alignflow.artifacts.usercode import module_name_for

        module = module_name_for(main_file)
    return module


def name_of(cls: type) -> str:
    """The name `cls` is journalled under (see the module docstring)."""
    given = _GIVEN.get(cls)
    if given is not None:
        return given
    module = module_of(cls)
    if module == OWN.rstrip(".") or module.startswith(OWN):
        return OWN + cls.__qualname__
    return f"{module}:{cls.__qualname__}"


def register(cls: type, name: str | None = None) -> type:
    """Allow `cls` in journals under `name` (default `name_of(cls)`)."""
    name = name or name_of(cls)
    other = find(name)
    if other is not None and _path(other) != _path(cls):  # not the same class re-imported
        raise FlowError(f"journal record name {name!r} is taken by {_path(other)}; register "
                        f"{_path(cls)} under a name of its own")
    if name != name_of(cls):
        _GIVEN[cls] = name
    allow_list.journal_record(cls, name)
    return cls


def _path(cls: type) -> str:
    return f"{module_of(cls)}:{cls.__qualname__}"


def find(name: str) -> type | None:
    """The allowed class journalled as `name`, or None; `FlowError` when two allowed
    classes answer to it."""
    found = allow_list.registered(name)  # registered under this very name
    return found if found is not None else _index().get(name)


def _index() -> dict[str, type]:
    """Every allowed class by its name (classes allowed under their module path by
    `artifacts.journal.journal_record` are found under their name here)."""
    entries = allow_list._RECORDS  # the allow-list itself: read here, written only there
    built = tuple(map(id, entries.values()))
    if _INDEXED[0] != built:
        _INDEX.clear()
        for key, cls in list(entries.items()):
            name = name_of(cls) if key == _path(cls) else key
            other = _INDEX.setdefault(name, cls)
            if other is not cls:
                raise FlowError(f"two journal record classes are named {name!r} "
                                f"({_path(other)} and {_path(cls)}); register one under a "
                                "name of its own: journal_record(cls, 'alignflow.NewName')")
        _INDEXED[0] = built
    return _INDEX
