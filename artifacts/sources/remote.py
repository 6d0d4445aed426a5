"""A source URL read through the store layer (`Store`: fresh fsspec filesystems, S3 errors
in one line, an endpoint outage ridden out): what it holds, and its files downloaded."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from fsspec.callbacks import Callback

from alignflow.artifacts import retry
from alignflow.artifacts.redact import redact
from alignflow.artifacts.s3errors import translate_errors
from alignflow.artifacts.sources.hashing import listing_fingerprint
from alignflow.artifacts.sources.progress import Progress
from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError

T = TypeVar("T")


@dataclass(frozen=True)
class Listing:
    """What a URL holds: one file (`single` = its name) or a folder of files."""

    url: str
    store: Store
    entries: dict[str, tuple[int, str]]  # path relative to the URL -> (size, ETag or mtime)
    single: str | None

    @property
    def fingerprint(self) -> str:
        return listing_fingerprint(self.entries)

    @property
    def total(self) -> int:
        return sum(size for size, _ in self.entries.values())


def listing(url: str) -> Listing:
    """The files at `url` (a folder's, recursively, or the one file it names);
    `ConfigError` naming the URL when nothing is there, `StoreError` when unreachable."""
    store = Store.open(url)
    found = store.find("")
    if not found:
        raise ConfigError(f"source {redact(url)!r}: nothing there (no object and no folder "
                          "of objects); expected a model folder or a data file")
    if "" in found:  # the URL names one object
        info = found[""]
        name = url.rstrip("/").rsplit("/", 1)[-1]
        return Listing(url, store, {name: (int(info["size"]), str(info["stamp"]))}, name)
    return Listing(url, store, {rel: (int(i["size"]), str(i["stamp"])) for rel, i in found.items()
                                if i.get("type", "file") == "file"}, None)


def _io(store: Store, rel: str, fn: Callable[[], T]) -> T:
    """`fn()` with errors named after the source, an outage retried once it answered."""
    def once() -> T:
        with translate_errors(redact(store.url) or store.url, rel):
            return fn()
    return retry.call(store, once)


class _Counted(Callback):
    """fsspec's transfer callback, feeding the fetch's progress."""

    def __init__(self, progress: Progress) -> None:
        super().__init__()
        self.progress = progress

    def relative_update(self, inc: int = 1) -> None:
        self.progress.add(inc)


def download(found: Listing, dest: Path, progress: Progress) -> None:
    """Every file of `found` into folder `dest`, streamed (never whole in memory)."""
    for rel in sorted(found.entries):
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        path = found.store.path("" if found.single else rel)

        def fetch(p: str = path, t: Path = target) -> None:  # a fresh count on each try
            found.store.fs.get_file(p, str(t), callback=_Counted(progress))
        _io(found.store, rel, fetch)


def read_member(url: str, name: str, limit: int = 16 * 2**20) -> bytes:
    """One small file of the folder at `url` (a model's config.json), without the rest."""
    store: Any = Store.open(url)
    return store.read_bytes(name, limit=limit)
