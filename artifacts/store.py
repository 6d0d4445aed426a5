"""The artifact store: one root (local dir, `memory://`, `s3://bucket/prefix`).

Every path the rest of alignflow uses is relative to the root. The one operation that
must be exactly right is `create_json`, the create-once commit of a manifest: a crash
leaves either the whole manifest or nothing, and a second commit is refused.

`Store` is the one front: it checks that a path stays below the root, picks each read's
bound by its kind of file (`bounds.py`) and speaks JSON; how bytes move is its backend's
(`backends/`: local, S3, memory, one class each). A store is data others may have shaped:
a local store is read, written, listed and deleted only below its root, through no link,
reading only regular files (`localfs.py`); S3 reads are one ranged GET. Libraries that
open store files by path get it from `readable_path` / `writable_path`.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

from alignflow.artifacts import bounds
from alignflow.artifacts.backends import open_backend
from alignflow.artifacts.backends.base import Backend, checked
from alignflow.artifacts.localfs import LocalRoot
from alignflow.artifacts.locations import local_folder
from alignflow.artifacts.s3errors import translate_errors
from alignflow.errors import ConfigError

if TYPE_CHECKING:  # fsspec is imported when a store that needs it is opened (urls.py)
    import fsspec

DEFAULT_URL = "./alignflow-store"


class Store:
    """A store root. Picklable: it re-opens its backend from `url` + options."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.backend: Backend = open_backend(url, self.storage_options)

    @classmethod
    def open(cls, url: str | None = None, *, storage_options: dict | None = None) -> Store:
        """Open `url` (default `$ALIGNFLOW_STORE`, else `./alignflow-store`)."""
        url = url or os.environ.get("ALIGNFLOW_STORE") or DEFAULT_URL
        return cls(url, storage_options)

    def __reduce__(self) -> tuple:
        return (Store, (self.url, self.storage_options), {"reached": self.reached})

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.reached = bool(state.get("reached"))

    def __repr__(self) -> str:
        return f"Store({self.url!r})"

    # -- what the backend is -----------------------------------------------------------------
    @property
    def protocol(self) -> str:
        return self.backend.protocol

    @property
    def root(self) -> str:
        return self.backend.root

    @property
    def fs(self) -> fsspec.AbstractFileSystem:
        """The fsspec filesystem (for libraries that take one: DuckDB, pyarrow)."""
        return self.backend.fs

    @property
    def local(self) -> LocalRoot | None:
        return self.backend.local

    @property
    def is_local(self) -> bool:
        return self.backend.is_local

    @property
    def reached(self) -> bool:
        """Has the store answered? (then an outage is retried: retry.py)"""
        return self.backend.reached

    @reached.setter
    def reached(self, value: bool) -> None:
        self.backend.reached = value

    def path(self, rel: str) -> str:
        """Full path inside `fs` of `rel` (relative to the root)."""
        return self.backend.full(checked(rel))

    def rel(self, full: str) -> str:
        """Inverse of `path`."""
        full = self.fs._strip_protocol(full)
        return full[len(self.root):].lstrip("/")

    @contextlib.contextmanager
    def _errors(self, rel: str = "") -> Iterator[None]:
        with translate_errors(self.url, rel):
            yield

    def where(self, rel: str) -> str:
        """`rel` as users see it in errors: the store URL and the path."""
        return self.backend.where(rel)

    # -- plain files ---------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        """Whether something is at `rel` (locally a link counts: reading it names it)."""
        return self.backend.exists(checked(rel))

    def read_bytes(self, rel: str, limit: int | None = None) -> bytes:
        """The bytes of `rel`, refused unread past `limit` (default: its kind's limit)."""
        limit = bounds.limit_for(rel) if limit is None else limit
        return self.backend.read(checked(rel), limit)

    def read_many(self, rels: Iterable[str]) -> dict[str, bytes | Exception]:
        """Several files at once (concurrent GETs on S3), each bounded like `read_bytes`; a
        file that cannot be read maps to its exception."""
        return self.backend.read_many(list(rels), self.read_bytes)

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Overwrite `rel` with `data` (atomic locally: temp + rename)."""
        self.backend.write(checked(rel), data)

    def put_file(self, local_path: str, rel: str) -> None:
        """Upload (or move, when local) a finished local file to `rel`."""
        self.backend.put_file(local_path, checked(rel))

    def writable_path(self, rel: str) -> str:
        """Local stores: the path of `rel` for a library that writes by path (its folders
        made, no link on the way or at the end; refused in one line otherwise)."""
        return self.backend.writable(checked(rel))

    def local_folder(self, path: str) -> str:
        """A write key's folder as the trust check parsed it (`locations.py`): inside this
        local store made through no link; elsewhere returned for its writer to make."""
        folder = local_folder(path)
        self.backend.make_local_folder(folder)
        return folder

    def readable_path(self, rel: str, size: int | None = None) -> str:
        """Local stores: the path of regular file `rel` (reached through no link; of exactly
        `size` bytes when given) for a library that reads by path."""
        return self.backend.readable(checked(rel), size)

    def open_file(self, rel: str, mode: str = "rb") -> IO[bytes]:
        """A binary file object for reading `rel` (writers go through `put_file`/`write_bytes`)."""
        if mode != "rb":
            raise ConfigError(f"open_file {rel!r}: mode {mode!r}; only 'rb' (reading)")
        return self.backend.open_file(checked(rel))

    def get_file(self, rel: str, local_path: str) -> None:
        """Copy `rel` to the local file `local_path`, streamed, whatever its size (locally:
        a regular file reached through no link)."""
        self.backend.get_file(checked(rel), local_path)

    def size(self, rel: str) -> int:
        return self.backend.size(checked(rel))

    def delete(self, rel: str, recursive: bool = False) -> None:
        """Remove `rel` (a folder too with `recursive`); locally a link itself, never its target."""
        self.backend.delete(checked(rel), recursive)

    def find(self, prefix: str = "") -> dict[str, dict[str, Any]]:
        """Every file under `prefix`: path -> {type ("file", or locally what else it is:
        "a symbolic link", "a FIFO", ...), size, mtime, stamp (ETag on S3, else mtime)};
        links are listed, never followed."""
        return self.backend.find(checked(prefix))

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
        self.backend.create(checked(rel), _dumps(obj))


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True, allow_nan=False).encode()


def open_store(store: Store | str | None = None) -> Store:
    """`store` as a Store: itself, or `Store.open(url)` (None: $ALIGNFLOW_STORE / default)."""
    return store if isinstance(store, Store) else Store.open(store)
