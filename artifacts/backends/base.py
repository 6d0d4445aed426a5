"""What every store backend answers: the `Store` front validates paths, picks size limits
and speaks JSON; a backend only moves bytes (and names its failures: `s3errors.py`).

`Backend` is the interface with the parts every backend shares (a URL to name things by,
an fsspec filesystem for libraries that need one, the local-path questions a non-local
store refuses). `FsspecBackend` is a remote-style backend over any fsspec filesystem:
reads are ranged GETs, an outage of a store that answered before is retried (`retry.py`).
A new backend is one subclass registered in `backends/__init__.py`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from functools import partial
from typing import IO, TYPE_CHECKING, Any, TypeVar

from alignflow.artifacts import bounds, retry
from alignflow.artifacts.localfs import LocalRoot
from alignflow.artifacts.s3errors import translate_errors
from alignflow.artifacts.urls import filesystem
from alignflow.errors import CommitConflict, ConfigError

if TYPE_CHECKING:  # imported where a filesystem is made (urls.filesystem)
    import fsspec

T = TypeVar("T")
Listing = dict[str, dict[str, Any]]


class Backend(ABC):
    """One store root reached one way. Every method takes paths relative to the root,
    already checked by `Store.path` to stay below it. The byte methods are abstract: a
    backend that forgets one fails when it is made, not on the first call that needs it."""

    protocol = ""
    is_local = False

    def __init__(self, url: str, root: str, options: dict[str, Any]) -> None:
        self.url, self.root = url, root
        self.fs: fsspec.AbstractFileSystem = filesystem(self.protocol, options)
        self.reached = False  # has the store answered? (then an outage is retried)

    @property
    def local(self) -> LocalRoot | None:
        """The folder walker of a local store (None elsewhere)."""
        return None

    def full(self, rel: str) -> str:
        return f"{self.root}/{rel}" if rel else self.root

    def where(self, rel: str) -> str:
        return f"{self.url.rstrip('/')}/{rel.strip('/')}"

    def conflict(self, rel: str) -> CommitConflict:
        return CommitConflict(f"{self.url}/{rel} is already committed; a commit happens once")

    def io(self, rel: str, fn: Callable[[], T]) -> T:
        """`fn()` with storage errors named after `rel` (remote backends retry an outage)."""
        with translate_errors(self.url, rel):
            return fn()

    def _no_path(self, rel: str) -> ConfigError:
        return ConfigError(f"{self.url}: {rel!r} has no local path (not a local store)")

    # -- local paths: only a local store has them ----------------------------------------------
    def writable(self, rel: str) -> str:
        raise self._no_path(rel)

    def readable(self, rel: str, size: int | None) -> str:
        raise self._no_path(rel)

    def make_local_folder(self, folder: str) -> None:
        """Make `folder` when it lies inside this store (a local store); elsewhere its
        writer makes it."""
        return None  # not abstract: only a local store has folders to make

    # -- bytes -----------------------------------------------------------------------------------
    @abstractmethod
    def exists(self, rel: str) -> bool:
        """Whether a file is at `rel`."""

    @abstractmethod
    def read(self, rel: str, limit: int) -> bytes:
        """The file's bytes; refused past `limit` bytes (`bounds.too_big`)."""

    def read_many(self, rels: list[str], read_one: Callable[[str], bytes]
                  ) -> dict[str, bytes | Exception]:
        """Several files (`read_one` each, here one after another); a file that cannot be
        read maps to its exception."""
        return {rel: _attempt(partial(read_one, rel)) for rel in rels}

    @abstractmethod
    def write(self, rel: str, data: bytes) -> None:
        """Write (or replace) `rel`."""

    @abstractmethod
    def create(self, rel: str, data: bytes) -> None:
        """Write `rel` only if nothing is there; `CommitConflict` otherwise."""

    @abstractmethod
    def put_file(self, local_path: str, rel: str) -> None:
        """Copy a local file to `rel`."""

    @abstractmethod
    def open_file(self, rel: str) -> IO[bytes]:
        """`rel` opened for reading (streamed)."""

    @abstractmethod
    def get_file(self, rel: str, local_path: str) -> None:
        """Copy `rel` to a local file."""

    @abstractmethod
    def size(self, rel: str) -> int:
        """`rel`'s size in bytes."""

    @abstractmethod
    def delete(self, rel: str, recursive: bool) -> None:
        """Remove `rel` (a folder with everything below it when `recursive`)."""

    @abstractmethod
    def find(self, prefix: str) -> Listing:
        """Every file below `prefix`: relative path -> type, size, mtime, stamp."""


class FsspecBackend(Backend):
    """A store on an fsspec filesystem: every call retried through an outage."""

    def io(self, rel: str, fn: Callable[[], T]) -> T:
        return retry.call(self, lambda: Backend.io(self, rel, fn))

    def exists(self, rel: str) -> bool:
        return self.io(rel, lambda: self.fs.exists(self.full(rel)))

    def read(self, rel: str, limit: int) -> bytes:
        data = self.io(rel, lambda: self._ranged_get(rel, limit + 1))
        if len(data) > limit:  # a ranged GET: never more than limit + 1 bytes arrive
            raise bounds.too_big(self.where(rel), None, limit)
        return data

    def _ranged_get(self, rel: str, end: int) -> bytes:
        try:
            return self.fs.cat_file(self.full(rel), start=0, end=end)
        except OSError as exc:
            if _unsatisfiable(exc):  # a ranged GET of an empty S3 object answers 416
                return b""
            raise

    def read_many(self, rels: list[str], read_one: Callable[[str], bytes]
                  ) -> dict[str, bytes | Exception]:
        """Concurrent ranged GETs, each bounded like `read`."""
        if not rels:
            return {}
        limits = {rel: bounds.limit_for(rel) for rel in rels}
        full = {self.full(checked(r)): r for r in rels}
        with translate_errors(self.url):
            got = self.fs.cat(list(full), on_error="return", start=0,
                              end=max(limits.values()) + 1)
        out: dict[str, bytes | Exception] = {}
        for path, data in got.items():
            rel, data = full[self.fs._strip_protocol(path)], b"" if _unsatisfiable(data) else data
            too_big = isinstance(data, bytes) and len(data) > limits[rel]
            out[rel] = bounds.too_big(self.where(rel), None, limits[rel]) if too_big else data
        return out

    def write(self, rel: str, data: bytes) -> None:
        self.io(rel, lambda: self.fs.pipe_file(self.full(rel), data))

    def put_file(self, local_path: str, rel: str) -> None:
        self.io(rel, lambda: self.fs.put_file(local_path, self.full(rel)))

    def open_file(self, rel: str) -> IO[bytes]:
        return self.io(rel, lambda: self.fs.open(self.full(rel), "rb"))

    def get_file(self, rel: str, local_path: str) -> None:
        self.io(rel, lambda: self.fs.get_file(self.full(rel), local_path))

    def size(self, rel: str) -> int:
        return self.io(rel, lambda: int(self.fs.size(self.full(rel))))

    def delete(self, rel: str, recursive: bool) -> None:
        tries = []

        def rm() -> None:
            tries.append(1)
            try:
                self.fs.rm(self.full(rel), recursive=recursive)
            except FileNotFoundError:
                if len(tries) == 1:  # a retry finds it gone: the first try did delete it
                    raise
        self.io(rel, rm)

    def find(self, prefix: str) -> Listing:
        base = self.full(prefix)

        def listing() -> dict:
            return self.fs.find(base, detail=True) if self.fs.exists(base) else {}
        return {self._rel(p): {"type": "file", "size": int(i.get("size") or 0),
                               "mtime": i.get("mtime") or i.get("LastModified") or i.get("created"),
                               "stamp": i.get("ETag") or i.get("mtime") or i.get("LastModified")}
                for p, i in self.io(prefix, listing).items()}

    def _rel(self, full: str) -> str:
        return self.fs._strip_protocol(full)[len(self.root):].lstrip("/")


def _unsatisfiable(answer: Any) -> bool:
    """S3's answer to a ranged GET from byte 0 of an empty object (416): it is empty."""
    return isinstance(answer, OSError) and "range is not satisfiable" in str(answer).lower()


def _attempt(fn: Callable[[], T]) -> T | Exception:
    try:
        return fn()
    except Exception as exc:  # handed to the caller, who names the file
        return exc



def checked(rel: str) -> str:
    """`rel` without its outer slashes; `ConfigError` when it would leave the root."""
    rel = rel.strip("/")
    if rel.startswith("..") or "/../" in f"/{rel}/":
        raise ConfigError(f"store path {rel!r} leaves the store root; expected a relative path")
    return rel
