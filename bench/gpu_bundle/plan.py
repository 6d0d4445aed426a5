"""What the GPU bundle must hold: the project's declared dependencies minus what the node has.

Starting from `[project].dependencies` and the extras `pins.EXTRA_ROOTS` names, every
requirement (its markers evaluated for the node: CPython 3.12, Linux x86_64) is resolved to
one of: on the node (`pins.NODE_HAS`, `pins.NODE_IMPLIED`), excluded with a reason
(`pins.EXCLUDED`), or pinned (`pins.PINS`), whose own requirements are then walked the same
way. A requirement that is none of these, a pin outside its specifier, and a pin nothing
needs are errors: the pins cannot drift from what the packages declare. The requirements of
a pin come from its wheel's METADATA when built, and offline (`--plan`) from this
environment's installed copy where that has the pinned version.
"""

from __future__ import annotations

import importlib.metadata
import tomllib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bench.gpu_bundle import pins

Requires = Callable[[str, str], list[str] | None]  # (name, version) -> Requires-Dist or None


class PlanError(ValueError):
    """The pins disagree with what the packages declare (one line: what, and the fix)."""


@dataclass(frozen=True)
class Entry:
    """One distribution the bundle carries."""

    name: str
    version: str
    kind: str
    group: str  # core, or datasets-fallback (installed instead of the core datasets set)
    needed_by: tuple[str, ...]


@dataclass
class Plan:
    """The resolved bundle: entries, the node's packages the bundle relies on, exclusions."""

    entries: list[Entry] = field(default_factory=list)
    node: dict[str, list[str]] = field(default_factory=dict)  # name -> "spec (needed by)"
    excluded: dict[str, str] = field(default_factory=dict)
    unread: list[str] = field(default_factory=list)  # pins whose requirements were not read

    def names(self, group: str = "core") -> list[str]:
        return [e.name for e in self.entries if e.group == group]


def project_roots(pyproject: Path) -> tuple[str, list[Requirement]]:
    """(project version, root requirements): the dependencies plus the chosen extras."""
    project = tomllib.loads(pyproject.read_text())["project"]
    roots = [Requirement(r) for r in project["dependencies"]]
    declared = {canonicalize_name(Requirement(r).name): Requirement(r)
                for reqs in project.get("optional-dependencies", {}).values() for r in reqs}
    for name in pins.EXTRA_ROOTS:
        if name not in declared:
            raise PlanError(f"pins.EXTRA_ROOTS names {name!r}, which no extra of "
                            f"{pyproject.name} declares; add it to an extra or drop it")
        roots.append(declared[name])
    return project["version"], roots


def _applies(req: Requirement, extras: tuple[str, ...] = ()) -> bool:
    """Whether `req` holds on the node, for a dependent installed with `extras`."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**pins.NODE_MARKERS, "extra": e}) for e in ("", *extras))


class _Walk:
    """One breadth-first walk over requirements, for one group of pins."""

    def __init__(self, plan: Plan, table: dict[str, pins.Pin], group: str,
                 requires: Requires) -> None:
        self.plan, self.table, self.group, self.requires = plan, table, group, requires
        self.seen: set[str] = set()
        self.node_names = set(pins.NODE_HAS) | set(pins.NODE_IMPLIED)

    def visit(self, req: Requirement, needed_by: str, extras: tuple[str, ...] = ()) -> None:
        if not _applies(req, extras):
            return
        name = canonicalize_name(req.name)
        if name in self.node_names:
            wanted = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            self.plan.node.setdefault(name, []).append(
                f"{wanted}{req.specifier or '*'} ({needed_by})")
        elif name in pins.EXCLUDED:
            self.plan.excluded[name] = pins.EXCLUDED[name]
        elif name in self.table:
            self._pinned(name, req, needed_by)
        else:
            raise PlanError(f"{needed_by} needs {req}, which the node lacks and "
                            f"bench/gpu_bundle/pins.py neither pins nor excludes; pin it")

    def _pinned(self, name: str, req: Requirement, needed_by: str) -> None:
        pin = self.table[name]
        if not req.specifier.contains(pin.version, prereleases=True):
            raise PlanError(f"{needed_by} needs {req}, but pins.py pins {name}=={pin.version}; "
                            "change the pin")
        if name in self.seen:
            return
        self.seen.add(name)
        self.plan.entries.append(Entry(name, pin.version, pin.kind, self.group, (needed_by,)))
        found = self.requires(name, pin.version)
        if found is None:
            self.plan.unread.append(f"{name}=={pin.version}")
            return
        extra = [r for r in pins.CUDA_BUILD_REQUIRES.get(name, ())
                 if r not in {canonicalize_name(Requirement(f).name) for f in found}]
        for line in [*found, *extra]:
            self.visit(Requirement(line), f"{name}=={pin.version}", tuple(sorted(req.extras)))


def resolve(pyproject: Path, requires: Requires, table: dict[str, pins.Pin] | None = None
            ) -> Plan:
    """The plan for the project at `pyproject`; `table` replaces `pins.PINS` (tests)."""
    table = dict(pins.PINS if table is None else table)
    version, roots = project_roots(pyproject)
    if table.get("alignflow", pins.Pin("")).version != version:
        raise PlanError(f"pins.py pins alignflow=={table.get('alignflow')}, the project is "
                        f"{version}; change the pin")
    plan = Plan(entries=[Entry("alignflow", version, "project", "core", ("the bundle",))])
    core = _Walk(plan, table, "core", requires)
    core.seen.add("alignflow")  # its requirements are the roots
    for req in roots:
        core.visit(req, "alignflow")
    unused = sorted(set(table) - core.seen)
    if unused:
        raise PlanError(f"pins.py pins {unused}, which nothing in the bundle needs; drop them")
    fallback = _Walk(plan, {**table, **pins.DATASETS_FALLBACK}, "datasets-fallback", requires)
    fallback.seen = set(core.seen) - set(pins.DATASETS_FALLBACK)
    for name, pin in pins.DATASETS_FALLBACK.items():
        fallback.visit(Requirement(f"{name}=={pin.version}"), "the datasets fallback")
    return plan


def installed_requires(name: str, version: str) -> list[str] | None:
    """Requires-Dist of this environment's copy of `name`, if it is the pinned version."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    return list(dist.requires or []) if dist.version == version else None


def chain(*sources: Requires) -> Requires:
    """The first source that knows a distribution's requirements."""
    def requires(name: str, version: str) -> list[str] | None:
        return next((r for s in sources if (r := s(name, version)) is not None), None)
    return requires


def describe(plan: Plan) -> Iterable[str]:
    """Human lines for the build log."""
    for group in ("core", "datasets-fallback"):
        yield f"{group}: " + ", ".join(f"{e.name}=={e.version}" for e in plan.entries
                                       if e.group == group)
    yield "on the node: " + ", ".join(sorted(plan.node))
    yield "excluded: " + ", ".join(sorted(plan.excluded)) if plan.excluded else "excluded: -"
