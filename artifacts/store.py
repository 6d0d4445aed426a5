"""The artifact store: one root (local dir, `memory://`, `s3://bucket/prefix`) over fsspec.

Every path the rest of alignflow uses is relative to the root. The one operation that
must be exactly right is `create_json`, the create-once commit of a manifest: a crash
leaves either the whole manifest or nothing, and a second commit is refused.
"""

from __future__ import annotations

import contextlib
import fnmatch
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import fsspec

from alignflow.artifacts import retry
from alignflow.artifacts.s3errors import translate_errors
from alignflow.errors import CommitConflict, ConfigError, SchemaError

DEFAULT_URL = "./alignflow-store"
T = TypeVar("T")
_MEMORY_LOCK = threading.Lock()


def _parse(url: str) -> tuple[str, str]:
    """`url` → (protocol, root path inside that filesystem)."""
    if url.startswith("s3://"):
        root = url[len("s3://"):].strip("/")
        if not root:
            raise ConfigError(f"store URL {url!r} names no bucket; expected s3://bucket/prefix")
        return "s3", root
    if url.startswith("memory://"):
        return "memory", "/" + url[len("memory://"):].strip("/")
    if url.startswith("file://"):
        url = url[len("file://"):]
    elif "://" in url:
        raise ConfigError(f"store URL {url!r}: expected a local path, file://, memory:// or s3://")
    return "file", os.path.abspath(os.path.expanduser(url))


def _filesystem(protocol: str, options: dict[str, Any]) -> fsspec.AbstractFileSystem:
    """A fresh filesystem (no fsspec instance cache, so credentials are never stale)."""
    options = dict(options)
    if protocol == "s3":
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_url" not in options:
            options["endpoint_url"] = endpoint
        options.setdefault("use_listings_cache", False)  # other processes write too
    if protocol == "file":
        options.setdefault("auto_mkdir", True)
    return fsspec.filesystem(protocol, skip_instance_cache=True, **options)


class Store:
    """A store root. Picklable: it re-opens its filesystem from `url` + options."""

    def __init__(self, url: str, storage_options: dict[str, Any] | None = None) -> None:
        self.url = url
        self.storage_options = dict(storage_options or {})
        self.protocol, self.root = _parse(url)
        self.fs = _filesystem(self.protocol, self.storage_options)
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
    def _errors(self, rel: str) -> Iterator[None]:
        with translate_errors(self.url, rel):
            yield

    def _io(self, rel: str, fn: Callable[[], T]) -> T:
        """`fn()` with storage errors named after `rel`; remote stores retry an outage."""
        def once() -> T:
            with translate_errors(self.url, rel):
                return fn()
        return once() if self.is_local else retry.call(self, once)

    # -- plain files ---------------------------------------------------------------------------
    def exists(self, rel: str) -> bool:
        return self._io(rel, lambda: self.fs.exists(self.path(rel)))

    def read_bytes(self, rel: str) -> bytes:
        return self._io(rel, lambda: self.fs.cat_file(self.path(rel)))

    def write_bytes(self, rel: str, data: bytes) -> None:
        """Overwrite `rel` with `data` (atomic locally: temp + rename)."""
        path = self.path(rel)
        if self.is_local:
            with self._errors(rel):
                os.replace(self._local_temp(path, data), path)
        else:
            self._io(rel, lambda: self.fs.pipe_file(path, data))

    def put_file(self, local_path: str, rel: str) -> None:
        """Upload (or move, when local) a finished local file to `rel`."""
        path = self.path(rel)
        if self.is_local:
            with self._errors(rel):
                os.makedirs(os.path.dirname(path), exist_ok=True)
                os.replace(local_path, path)
        else:
            self._io(rel, lambda: self.fs.put_file(local_path, path))

    def open_file(self, rel: str, mode: str = "rb"):
        """A file object for reading `rel` (writers go through `put_file`/`write_bytes`)."""
        return self._io(rel, lambda: self.fs.open(self.path(rel), mode))

    def size(self, rel: str) -> int:
        return self._io(rel, lambda: int(self.fs.size(self.path(rel))))

    def delete(self, rel: str, recursive: bool = False) -> None:
        tries = []

        def rm() -> None:
            tries.append(1)
            try:
                self.fs.rm(self.path(rel), recursive=recursive)
            except FileNotFoundError:
                if len(tries) == 1:  # a retry finds it gone: the first try did delete it
                    raise
        self._io(rel, rm)

    def list(self, prefix: str = "", pattern: str | None = None) -> list[str]:
        """Files under `prefix` (recursive, sorted), relative to the root; `pattern` is an
        fnmatch glob on the path relative to `prefix`."""
        base = self.path(prefix)

        def find() -> list[str]:
            return self.fs.find(base) if self.fs.exists(base) else []
        rels = sorted(self.rel(p) for p in self._io(prefix, find))
        if pattern is None:
            return rels
        cut = len(prefix.strip("/")) + 1 if prefix.strip("/") else 0
        return [r for r in rels if fnmatch.fnmatchcase(r[cut:], pattern)]

    # -- JSON ----------------------------------------------------------------------------------
    def read_json(self, rel: str) -> Any:
        """Parsed JSON of `rel`; a file that is not JSON is a `SchemaError` naming it."""
        data = self.read_bytes(rel)
        try:
            return json.loads(data)
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            raise SchemaError(f"{self.url.rstrip('/')}/{rel} is not valid JSON "
                              f"({_first_line(exc)})") from None

    def write_json(self, rel: str, obj: Any) -> None:
        """Plain overwrite (run.json, lease.json): atomic where the filesystem allows."""
        self.write_bytes(rel, _dumps(obj))

    def create_json(self, rel: str, obj: Any) -> None:
        """Create-once commit of `rel`; `CommitConflict` if it already exists."""
        data, path = _dumps(obj), self.path(rel)
        if self.is_local:
            with self._errors(rel):
                self._create_local(rel, path, data)
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
                if len(tries) > 1 and self.fs.cat_file(path) == data:
                    return
                raise _conflict(self, rel) from None
        return put

    def _create_local(self, rel: str, path: str, data: bytes) -> None:
        tmp = self._local_temp(path, data)
        try:
            os.link(tmp, path)  # fails if `path` exists: no replace, ever
        except FileExistsError:
            raise _conflict(self, rel) from None
        finally:
            os.unlink(tmp)
        _fsync_dir(os.path.dirname(path))

    @staticmethod
    def _local_temp(path: str, data: bytes) -> str:
        """Write `data` to a hidden, fsynced temp file next to `path`."""
        folder, name = os.path.split(path)
        os.makedirs(folder, exist_ok=True)
        tmp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
        try:
            with open(tmp, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)  # a full disk leaves no half-written temp behind
            raise
        return tmp


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, indent=1, sort_keys=True, allow_nan=False).encode()


def _conflict(store: Store, rel: str) -> CommitConflict:
    return CommitConflict(f"{store.url}/{rel} is already committed; a commit happens once")


def _fsync_dir(folder: str) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def open_store(store: Store | str | None = None) -> Store:
    """`store` as a Store: itself, or `Store.open(url)` (None: $ALIGNFLOW_STORE / default)."""
    return store if isinstance(store, Store) else Store.open(store)
