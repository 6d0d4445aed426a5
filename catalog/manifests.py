"""Scan a store's committed state: run records, task manifests and the files they list.

A data file is visible to SQL only if a committed manifest lists it, so the catalog never
globs data folders: it lists `runs/`, reads every `run.json` and every manifest (one batched
read, concurrent on S3, each file bounded in size and nesting: artifacts/bounds.py), and
keeps the listed paths. Orphans are never seen.

One bad file never hides the rest of the store: a run record or manifest that cannot be
read or parsed, is too big or too deep, a link, FIFO or device anywhere in a run (never
followed or opened), or a listed path that leaves the store, becomes a `Problem` naming the
file; its run is marked (`runs.problem`) and everything else is served.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from alignflow.artifacts.bounds import parse_json
from alignflow.artifacts.commit import tombstoned, validate
from alignflow.artifacts.layout import require_store
from alignflow.artifacts.store import Store
from alignflow.catalog.index import Index
from alignflow.catalog.rows import blank_run, check_task, run_row, task_row
from alignflow.errors import ConfigError, SchemaError, StoreFileRefused

_TABLE_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_RESERVED = {"runs", "tasks"}


@dataclass(frozen=True)
class Problem:
    """A store file the catalog had to leave out: its path, its run and one line why."""

    path: str  # store-relative
    run_id: str | None
    message: str  # names the file by its full URL


@dataclass
class Snapshot:
    """What a scan found: rows for `runs`/`tasks`, files per data table, and the files that
    could not be used (each left out, named, and marked on its run); for checking the data
    files (catalog/verify.py): the listing (path -> type, size) and each file's manifest entry."""

    runs: list[dict[str, Any]]
    manifests: list[tuple[str, dict[str, Any]]]  # (path, validated manifest) of each task
    files: dict[str, list[str]] = field(default_factory=dict)  # table -> store-relative paths
    problems: list[Problem] = field(default_factory=list)
    listing: dict[str, dict[str, Any]] = field(default_factory=dict)
    refs: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> artifact entry

    @property
    def tasks(self) -> list[dict[str, Any]]:
        """The rows of `tasks` (made when asked for: `rows.check_task` vetted them)."""
        return [task_row(rel, manifest) for rel, manifest in self.manifests]

    def runs_table(self, extra: Sequence[Problem] = ()) -> list[dict[str, Any]]:
        """The `runs` rows, each with the problems of its files (`problem` column)."""
        by_run: dict[str, list[str]] = {}
        for p in [*self.problems, *extra]:
            by_run.setdefault(p.run_id or "", []).append(p.message)
        rows = [dict(r, problem="; ".join(by_run.get(r["run_id"], [])) or None)
                for r in self.runs]
        known = {r["run_id"] for r in rows}
        rows += [blank_run(rid, msgs) for rid, msgs in by_run.items() if rid and rid not in known]
        return rows


def scan(store: Store, index: Index | None = None) -> Snapshot:
    """Read the committed state of every run in `store`; unreadable files become problems.
    A run record or manifest `index` holds unchanged is taken from it, not read again (and
    validated all the same); what is read is put in it."""
    require_store(store)
    index = index or Index(store.url, None)
    listing = store.find("runs")
    deleting = tombstoned(list(listing))  # runs being deleted are gone already
    snap = Snapshot([], [], listing={r: i for r, i in listing.items()
                                     if run_of(r) not in deleting})
    index.listing = snap.listing
    rels = [r for r, i in snap.listing.items() if i["type"] == "file"]
    snap.problems += [_odd(store, r, i) for r, i in snap.listing.items() if i["type"] != "file"]
    run_rels = [r for r in rels if _is_run_json(r)]
    manifest_rels = [r for r in rels if _is_manifest(r)]
    blobs = _blobs(store, index, run_rels + manifest_rels)
    read = [rel for rel, blob in blobs.items() if not isinstance(blob, dict)]  # not indexed
    for rel in run_rels:
        row = _use(store, rel, blobs, snap.problems, lambda obj, rel=rel: run_row(rel, obj))
        snap.runs.append(row or blank_run(rel.split("/")[1], []))  # runs/<id>/run.json
    for rel in manifest_rels:
        entry = _use(store, rel, blobs, snap.problems,
                     lambda obj, rel=rel: _manifest_entry(store, rel, obj))
        if entry:
            snap.manifests.append((rel, entry))
            _add_files(store, rel, entry, snap)
    for rel in read:
        if isinstance(blobs.get(rel), dict):
            index.put(rel, "json", blobs[rel])
    snap.files = {t: sorted(set(p)) for t, p in snap.files.items()}
    return snap


def _blobs(store: Store, index: Index, rels: list[str]) -> dict:
    """rel -> its parsed JSON from `index` where unchanged, else its bytes from the store
    (one batched read) or the exception that stopped the read."""
    out: dict[str, Any] = {rel: index.get(rel, "json") for rel in rels}
    out = {rel: obj for rel, obj in out.items() if isinstance(obj, dict)}
    return out | store.read_many([r for r in rels if r not in out])


def _use(store: Store, rel: str, blobs: dict[str, Any], problems: list[Problem], make):
    """`make(parsed JSON)`, or None with a problem naming the file when it cannot be used;
    the parsed JSON replaces the bytes in `blobs` (for the index)."""
    data = blobs.get(rel)
    if isinstance(data, BaseException):
        text = _one_line(data) if isinstance(data, StoreFileRefused) else \
            f"cannot read {store.url}/{rel}: {_one_line(data)}"
        problems.append(Problem(rel, run_of(rel), text))
        return None
    try:
        if isinstance(data, bytes):
            data = blobs[rel] = _parse(f"{store.url}/{rel}", data)
        return make(data)
    except (SchemaError, ValueError, TypeError, KeyError, AttributeError) as exc:
        text = _one_line(exc)
        where = f"{store.url}/{rel}"
        problems.append(Problem(rel, run_of(rel), text if where in text else f"{where}: {text}"))
        return None


def _manifest_entry(store: Store, rel: str, obj: dict[str, Any]) -> dict[str, Any]:
    """The validated manifest (its `tasks` row can be made)."""
    manifest = validate(obj, f"{store.url}/{rel}")
    check_task(manifest)
    return manifest


def _add_files(store: Store, rel: str, manifest: dict[str, Any], snap: Snapshot) -> None:
    """Files a manifest lists; a path that leaves the store or is not one Parquet file, or a
    table name that is not plain or is ours (`runs`, `tasks`, `_af_*`), is a problem."""
    for art in manifest.get("artifacts") or []:
        path, table = str(art["path"]), str(art["table"])
        try:
            store.path(path)
            if not path.endswith(".parquet") or any(c in path for c in "*?[{"):
                raise ConfigError(f"artifact path {path!r}: expected one .parquet file, no "
                                  "folder or glob")
            if not _TABLE_NAME.match(table) or table in _RESERVED or table.startswith("_af_"):
                raise ConfigError(f"table name {table!r}: expected lower-case letters, digits "
                                  "and _, not runs, tasks or _af_*")
        except ConfigError as exc:
            snap.problems.append(Problem(rel, run_of(rel), f"{store.url}/{rel}: {exc}"))
            continue
        snap.files.setdefault(table, []).append(path.strip("/"))
        snap.refs[path.strip("/")] = art


def _odd(store: Store, rel: str, info: dict[str, Any]) -> Problem:
    """A link, FIFO or device in the store, as a problem of its run (never followed or
    opened); a run folder that is a link still gets its (blank, marked) `runs` row."""
    return Problem(rel, run_of(rel), f"{store.where(rel)} is {info['type']}; a store holds "
                   "only regular files and folders, and alignflow never follows a link in it; "
                   "left out")


def run_of(rel: str) -> str | None:
    """The run a store path belongs to (`runs/<run_id>/...`)."""
    parts = rel.split("/")
    return parts[1] if len(parts) > 1 and parts[0] == "runs" else None


def _one_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def _is_run_json(rel: str) -> bool:
    parts = rel.split("/")
    return len(parts) == 3 and parts[2] == "run.json"


def _is_manifest(rel: str) -> bool:
    parts = rel.split("/")
    return (len(parts) >= 4 and parts[2] == "tasks" and parts[-1].endswith(".json")
            and not parts[-1].startswith("."))


def _parse(where: str, data: bytes) -> dict[str, Any]:
    try:
        obj = parse_json(data, where)
    except StoreFileRefused:
        raise
    except SchemaError as exc:
        raise SchemaError(f"{exc}; expected a run record or manifest") from None
    if not isinstance(obj, dict):
        raise SchemaError(f"{where} holds a {type(obj).__name__}; expected a JSON object")
    return obj


