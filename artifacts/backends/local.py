"""A store in a local folder: every operation walks from the root through no link and reads
only regular files (`localfs.LocalRoot`); writes are atomic (temp + rename), a commit is a
hard link that never replaces. An error is named, never retried: the disk is here. Its fsspec
filesystem (for the libraries that take one) is made on first use: the store's own reads,
writes and listings never need it, and `alignflow sql` imports no fsspec."""

from __future__ import annotations

import shutil
from functools import cached_property
from typing import IO, TYPE_CHECKING, Any

from alignflow.artifacts.backends.base import Backend, Listing, checked
from alignflow.artifacts.localfs import LocalRoot
from alignflow.artifacts.locations import relative_inside
from alignflow.artifacts.urls import filesystem

if TYPE_CHECKING:
    import fsspec


class LocalBackend(Backend):
    protocol = "file"
    is_local = True

    def __init__(self, url: str, root: str, options: dict[str, Any]) -> None:
        # not Backend.__init__: it makes the fsspec filesystem at once (see `fs`)
        self.url, self.root, self.reached = url, root, False
        self._options = options
        self._walker = LocalRoot(root, url)

    @cached_property
    def fs(self) -> fsspec.AbstractFileSystem:
        """fsspec's local filesystem, made (and fsspec imported) when first asked for."""
        return filesystem(self.protocol, self._options)

    @property
    def local(self) -> LocalRoot:
        return self._walker

    def exists(self, rel: str) -> bool:
        """A link counts: reading it names it."""
        return self.io(rel, lambda: self._walker.lstat(rel) is not None)

    def read(self, rel: str, limit: int) -> bytes:
        return self.io(rel, lambda: self._walker.read(rel, limit))

    def write(self, rel: str, data: bytes) -> None:
        self.io(rel, lambda: self._walker.write(rel, data))

    def create(self, rel: str, data: bytes) -> None:
        if not self.io(rel, lambda: self._walker.write(rel, data, once=True)):
            raise self.conflict(rel)  # a hard link never replaces

    def put_file(self, local_path: str, rel: str) -> None:
        self.io(rel, lambda: self._walker.move_in(local_path, rel))

    def open_file(self, rel: str) -> IO[bytes]:
        return self.io(rel, lambda: self._walker.open_file(rel))

    def get_file(self, rel: str, local_path: str) -> None:
        with self.open_file(rel) as src, open(local_path, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)

    def size(self, rel: str) -> int:
        return self.io(rel, lambda: self._walker.readable_size(rel))

    def delete(self, rel: str, recursive: bool) -> None:
        self.io(rel, lambda: self._walker.remove(rel, recursive))

    def find(self, prefix: str) -> Listing:
        found = self.io(prefix, lambda: self._walker.entries(prefix))
        return {r: {"type": e.kind, "size": e.size, "mtime": e.mtime, "stamp": e.mtime}
                for r, e in found.items()}

    def writable(self, rel: str) -> str:
        return self.io(rel, lambda: self._walker.writable(rel))

    def readable(self, rel: str, size: int | None) -> str:
        return self.io(rel, lambda: self._walker.readable(rel, size))

    def make_local_folder(self, folder: str) -> None:
        """Inside this store: made from the root through no link."""
        if (rel := relative_inside(folder, self.root)) not in (None, "."):
            rel = checked(rel)
            self.io(rel, lambda: self._walker.make_folder(rel))
