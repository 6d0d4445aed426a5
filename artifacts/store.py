"""The artifact store: one root (local dir, `memory://`, `s3://bucket/prefix`) over fsspec.

Every path the rest of alignflow uses is relative to the root. The one operation that
must be exactly right is `create_json`, the create-once commit of a manifest: a crash
leaves either the whole manifest or nothing, and a second commit is refused.

A store is data others may have shaped, so every read is bounded by its kind of file
(`bounds.py`; on S3 one ranged GET), and a local store is read, written, listed and deleted
only below its root, through no link, reading only regular files (`localfs.py`); libraries
that open store files by path get it from `readable_path` / `writable_path`.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from alignflow.artifacts import bounds, retry
from alignflow.artifacts.localfs import LocalRoot
from alignflow.artifacts.locations import local_folder, relative_inside
from alignflow.artifacts.s3errors import translate_errors
from alignflow.artifacts.urls import filesystem, parse_url
from alignflow.errors import CommitConflict, ConfigError

DEFAULT_URL = "./alignflow-store"
T = TypeVar("T")
_MEMORY_LOCK = threading.Lock()


class Store:
    """A store root. Picklable: it re-opens its filesystem from `url` + options."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.protocol, self.root = parse_url(url)
        self.fs = filesystem(self.protocol, self.storage_options)
        self.local = LocalRoot(self.root, url) if self.protocol == "file" else None
        self.reached = False  # has the store answered? (then an outage is retried: retry.py)

    @classmethod
    def open(cls, url: str | None = None, *, storage_options: dict | None = None) -> Store:
        """Open `url` (default `$ALIGNFLOW_STORE`, else `./alignflow-store`)."""
        url = url or os.environ.get("ALIGNFLOW_STORE") or DEFAULT_URL
        return cls(url, storage_options)

    def __reduce__(self):
        return (Store, (self.url, self.storage_options), {"reached": self.reached})

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    @property
    def is_local(self) -> bool:
        return self.protocol == "file"

    def path(self, rel: str) -> str:
        """Full path inside `fs` of `rel` (relative to the root)."""
        rel = rel.strip("/")
        if rel.startswith("..") or "/../" in f"/{rel}/":
            raise ConfigError(f"store path {rel!r} leaves the store root; expected a relative path")
        return f"{self.root}/{rel}" if rel else self.root

    def rel(self, full: str) -> str:
        """Inverse of `path`."""
        full = self.fs._strip_protocol(full)
        return full[len(self.root):].lstrip("/")

    @contextlib.contextmanager
    def _errors(self, rel: str = "") -> Iterator[None]:
        with translate_errors(self.url, rel):
            yield

    def _io(self, rel: str, fn: Callable[[], T]) -> T:
        """`fn()` with storage errors named after `rel`; remote stores retry an outage."""
        def once() -> T:
            with translate_errors(self.url, rel):
                return fn()
        return once() if self.is_local else retry.call(self, once)

    def _disk(self, rel: str, fn: Callable[[str], T]) -> T:
        """`fn(rel)` on a local store: `rel` checked to stay below the root, errors named."""
        if self.local is None:
            raise ConfigError(f"{self.url}: {rel!r} has no local path (not a local store)")
        self.path(rel)
        with self._errors(rel):
            return fn(rel.strip("/"))

    def where(self, rel: str) -> str:
        """`rel` as users see it in errors: the store URL and the path."""
        return f"{self.url.rstrip('/')}/{rel.strip('/')}"

    # -- plain files ---------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        """Whether something is at `rel` (locally a link counts: reading it names it)."""
        if self.local:
            return self._disk(rel, lambda r: self.local.lstat(r) is not None)
        return self._io(rel, lambda: self.fs.exists(self.path(rel)))

    def read_bytes(self, rel: str, limit: int | None = None) -> bytes:
        """The bytes of `rel`, refused unread past `limit` (default: its kind's limit)."""
        limit = bounds.limit_for(rel) if limit is None else limit
        if self.local:
            return self._disk(rel, lambda r: self.local.read(r, limit))
        data = self._io(rel, lambda: self._ranged_get(rel, limit + 1))
        if len(data) > limit:  # a ranged GET: never more than limit + 1 bytes arrive
            raise bounds.too_big(self.where(rel), None, limit)
        return data

    def _ranged_get(self, rel: str, end: int) -> bytes:
        try:
            return self.fs.cat_file(self.path(rel), start=0, end=end)
        except OSError as exc:
            if _unsatisfiable(exc):  # a ranged GET of an empty S3 object answers 416
                return b""
            raise

    def read_many(self, rels: Iterable[str]) -> dict[str, bytes | Exception]:
        """Several files at once (concurrent GETs on S3), each bounded like `read_bytes`; a
        file that cannot be read maps to its exception."""
        rels = list(rels)
        if self.local or not rels:
            return {rel: _attempt(lambda rel=rel: self.read_bytes(rel)) for rel in rels}
        limits = {rel: bounds.limit_for(rel) for rel in rels}
        full = {self.path(r): r for r in rels}
        with self._errors():
            got = self.fs.cat(list(full), on_error="return", start=0,
                              end=max(limits.values()) + 1)
        out: dict[str, bytes | Exception] = {}
        for path, data in got.items():
            rel, data = full[self.fs._strip_protocol(path)], b"" if _unsatisfiable(data) else data
            too_big = isinstance(data, bytes) and len(data) > limits[rel]
            out[rel] = bounds.too_big(self.where(rel), None, limits[rel]) if too_big else data
        return out

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Overwrite `rel` with `data` (atomic locally: temp + rename)."""
        path = self.path(rel)
        if self.local:
            self._disk(rel, lambda r: self.local.write(r, data))
        else:
            self._io(rel, lambda: self.fs.pipe_file(path, data))

    def put_file(self, local_path: str, rel: str) -> None:
        """Upload (or move, when local) a finished local file to `rel`."""
        path = self.path(rel)
        if self.local:
            self._disk(rel, lambda r: self.local.move_in(local_path, r))
        else:
            self._io(rel, lambda: self.fs.put_file(local_path, path))

    def writable_path(self, rel: str) -> str:
        """Local stores: the path of `rel` for a library that writes by path (its folders
        made, no link on the way or at the end; refused in one line otherwise)."""
        return self._disk(rel, self.local.writable)

    def local_folder(self, path: str) -> str:
        """A write key's folder as the trust check parsed it (`locations.py`): inside this
        local store made through no link; elsewhere returned for its writer to make."""
        folder = local_folder(path)
        if (rel := relative_inside(folder, self.root) if self.local else None) not in (None, "."):
            self._disk(rel, self.local.make_folder)
        return folder

    def readable_path(self, rel: str, size: int | None = None) -> str:
        """Local stores: the path of regular file `rel` (reached through no link; of exactly
        `size` bytes when given) for a library that reads by path."""
        return self._disk(rel, lambda r: self.local.readable(r, size))

    def open_file(self, rel: str, mode: str = "rb"):
        """A binary file object for reading `rel` (writers go through `put_file`/`write_bytes`)."""
        if mode != "rb":
            raise ConfigError(f"open_file {rel!r}: mode {mode!r}; only 'rb' (reading)")
        if self.local:
            return self._disk(rel, self.local.open_file)
        return self._io(rel, lambda: self.fs.open(self.path(rel), mode))

    def get_file(self, rel: str, local_path: str) -> None:
        """Copy `rel` to the local file `local_path`, streamed, whatever its size (locally:
        a regular file reached through no link)."""
        if not self.local:
            return self._io(rel, lambda: self.fs.get_file(self.path(rel), local_path))
        with self._disk(rel, self.local.open_file) as src, open(local_path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)

    def size(self, rel: str) -> int:
        if self.local:
            return self._disk(rel, lambda r: self.local.readable_size(r))
        return self._io(rel, lambda: int(self.fs.size(self.path(rel))))

    def delete(self, rel: str, recursive: bool = False) -> None:
        """Remove `rel` (a folder too with `recursive`); locally a link itself, never its target."""
        if self.local:
            return self._disk(rel, lambda r: self.local.remove(r, recursive))
        tries = []

        def rm() -> None:
            tries.append(1)
            try:
                self.fs.rm(self.path(rel), recursive=recursive)
            except FileNotFoundError:
                if len(tries) == 1:  # a retry finds it gone: the first try did delete it
                    raise
        self._io(rel, rm)

    def find(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Every file under `prefix`: path -> {type ("file", or locally what else it is:
        "a symbolic link", "a FIFO", ...), size, mtime, stamp (ETag on S3, else mtime)};
        links are listed, never followed."""
        base = self.path(prefix)
        if self.local:
            found = self._disk(prefix, self.local.entries)
            return {r: {"type": e.kind, "size": e.size, "mtime": e.mtime, "stamp": e.mtime}
                    for r, e in found.items()}

        def listing() -> dict:
            return self.fs.find(base, detail=True) if self.fs.exists(base) else {}
        return {self.rel(p): {"type": "file", "size": int(i.get("size") or 0),
                              "mtime": i.get("mtime") or i.get("LastModified") or i.get("created"),
                              "stamp": i.get("ETag") or i.get("mtime") or i.get("LastModified")}
                for p, i in self._io(prefix, listing).items()}

    def list(self, prefix: str = "", pattern: str | None = None) -> list[str]:
        """Files under `prefix` (recursive, sorted), relative to the root; `pattern` is an
        fnmatch glob on the path relative to `prefix`."""
        rels = sorted(self.find(prefix))
        if pattern is None:
            return rels
        cut = len(prefix.strip("/")) + 1 if prefix.strip("/") else 0
        return [r for r in rels if fnmatch.fnmatchcase(r[cut:], pattern)]

    # -- JSON ----------------------------------------------------------------------------------
    def read_json(self, rel: str) -> Any:
        """Parsed JSON of `rel` (bounded in size and depth); a file that is not JSON is a
        `SchemaError` naming it."""
        return bounds.parse_json(self.read_bytes(rel), self.where(rel))

    def write_json(self, rel: str, obj: Any) -> None:
        """Plain overwrite (run.json, lease.json): atomic where the filesystem allows."""
        self.write_bytes(rel, _dumps(obj))

    def create_json(self, rel: str, obj: Any) -> None:
        """Create-once commit of `rel`; `CommitConflict` if it already exists."""
        data, path = _dumps(obj), self.path(rel)
        if self.local:
            if not self._disk(rel, lambda r: self.local.write(r, data, once=True)):
                raise _conflict(self, rel)  # a hard link never replaces
        elif self.protocol == "s3":
            self._io(rel, self._create_s3(rel, path, data))
        else:
            with self._errors(rel), _MEMORY_LOCK:
                if self.fs.exists(path):
                    raise _conflict(self, rel)
                self.fs.pipe_file(path, data)

    def _create_s3(self, rel: str, path: str, data: bytes) -> Callable[[], None]:
        """One conditional PUT (If-None-Match). Retried after an outage, a conflict with the
        very bytes we sent means our earlier PUT landed before its answer was lost."""
        tries = []

        def put() -> None:
            tries.append(1)
            try:
                self.fs.pipe_file(path, data, mode="create")
            except FileExistsError:
                if len(tries) > 1 and self.fs.cat_file(path, start=0, end=len(data) + 1) == data:
                    return
                raise _conflict(self, rel) from None
        return put


def _unsatisfiable(answer: Any) -> bool:
    """S3's answer to a ranged GET from byte 0 of an empty object (416): it is empty."""
    return isinstance(answer, OSError) and "range is not satisfiable" in str(answer).lower()


def _attempt(fn: Callable[[], T]) -> T | Exception:
    try:
        return fn()
    except Exception as exc:  # handed to the caller, who names the file
        return exc


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True, allow_nan=False).encode()


def _conflict(store: Store, rel: str) -> CommitConflict:
    return CommitConflict(f"{store.url}/{rel} is already committed; a commit happens once")


def open_store(store: Store | str | None = None) -> Store:
    """`store` as a Store: itself, or `Store.open(url)` (None: $ALIGNFLOW_STORE / default)."""
    return store if isinstance(store, Store) else Store.open(store)
