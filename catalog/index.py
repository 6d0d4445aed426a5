"""The reader's index: what earlier openings of a store learnt, so the next one re-reads
only what changed.

Opening a catalog reads every run record and task manifest and checks every data file's
footer (`verify.py`, `shape.py`): at 10,000 tasks that was seconds per `alignflow sql`. The
index keeps, per store file, its parsed JSON (run records, manifests) or its footer facts
(rows, schema name and version, column names), each keyed by the file's size and stamp from
the store's one listing (ETag on S3, mtime locally). A file whose size or stamp differs, or
that is new, is read and checked again; a removed one drops out.

It lives in a local cache folder (`$ALIGNFLOW_CATALOG_CACHE`, else
`$XDG_CACHE_HOME/alignflow/catalog`, else `~/.cache/...`), one JSON file per store URL,
written whole and renamed into place. It is data, never code: read bounded in size, parsed
as JSON, and every entry is used only where its key matches the listing; cached manifests
go through the same validation as ones read from the store. A file that is unreadable,
too big, malformed or for another store is ignored (the store is read as if there were
none). A file swapped for one of the same size with its mtime set back is not noticed
locally (S3's ETag is a hash of the bytes).

A file's column names are kept once per distinct list (`shapes`), each file naming its list
by number: the files of one table share theirs, and 10,000 copies were half the index's
bytes, parsed at every opening (~0.05 CPU s at 10,000 files).

Per data table it also keeps a summary (`summary`/`put_summary`): that every one of its
files passed the checks, and whether they agree on columns, under a digest of the files'
paths, listing keys and manifest entries. While the digest is the same, the checks are not
run again file by file (at 10,000 files, ~0.3 CPU s of each opening). Only a table whose
files all passed is summarised, so a tampered summary can at most serve files the checks
would have left out, as a tampered footer fact could: it never names a file (the files are
always those the manifests list now) and is one boolean.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from typing import Any

from alignflow.artifacts.bounds import MAX_DEPTH, depth

FORMAT = 2  # 2: column names as numbers into `shapes`
MAX_BYTES = 256 * 2**20  # ~25 kB per task at 10,000 tasks; a bigger file is ignored
_STAMPS = (str, int, float)


def folder() -> str:
    """The local folder of index files."""
    if os.environ.get("ALIGNFLOW_CATALOG_CACHE"):
        return os.environ["ALIGNFLOW_CATALOG_CACHE"]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "alignflow", "catalog")


def _key(info: dict[str, Any]) -> list | None:
    """[size, stamp] of a listing entry; None when the store gives no usable stamp."""
    stamp = info.get("stamp")
    if info.get("type") != "file" or not isinstance(stamp, _STAMPS) or isinstance(stamp, bool):
        return None
    return [int(info.get("size") or 0), stamp]


class Index:
    """Cached facts per store file, each valid while the file's [size, stamp] is unchanged."""

    def __init__(self, url: str, path: str | None, entries: dict[str, Any] | None = None,
                 summaries: dict[str, Any] | None = None, shapes: list | None = None) -> None:
        self.url, self.path = url, path
        self._old: dict[str, Any] = entries or {}
        self._shapes: list = shapes or []  # column name lists, by number (`_names`)
        self._new: dict[str, Any] = {}
        self._old_summaries: dict[str, Any] = summaries or {}
        self._summaries: dict[str, Any] = {}
        self._asked: set[str] = set()  # summaries looked up (then kept only if put or used)
        self.listing: dict[str, dict[str, Any]] = {}  # the store's listing it is checked against

    def get(self, rel: str, kind: str) -> Any:
        """The cached `kind` fact of `rel` (None unless its key matches the listing)."""
        key = _key(self.listing.get(rel) or {})
        entry = self._old.get(rel)
        if key is None or not isinstance(entry, list) or len(entry) != 2 or entry[0] != key:
            return None
        facts = entry[1]
        if not isinstance(facts, dict) or kind not in facts:
            return None
        fact = facts[kind]
        if kind == "json" and depth(fact, MAX_DEPTH) > MAX_DEPTH:
            return None  # as deep as the store's own JSON may be, no deeper
        if kind == "columns":
            names = self._names(fact)
            if names is None:
                return None
            fact = [fact[0], names]
        self._keep(rel, key, kind, fact)
        return fact

    def put(self, rel: str, kind: str, fact: Any) -> None:
        """Remember `fact` about `rel` (as listed now) for the next opening."""
        key = _key(self.listing.get(rel) or {})
        if key is not None:
            self._keep(rel, key, kind, fact)

    def digest(self, rels: list[str], refs: dict[str, dict[str, Any]]) -> str | None:
        """A digest of files `rels` as listed now and as their manifests record them (None
        when one has no usable listing key)."""
        h = hashlib.sha256()
        for rel in rels:
            key, ref = _key(self.listing.get(rel) or {}), refs.get(rel) or {}
            if key is None:
                return None
            h.update(f"{rel}\0{key[0]}\0{key[1]!r}\0{ref.get('rows')!r}\0{ref.get('bytes')!r}"
                     f"\0{ref.get('schema')!r}\0{ref.get('schema_version')!r}\n".encode())
        return h.hexdigest()

    def summary(self, name: str, digest: str | None) -> bool | None:
        """The summary `name` kept under `digest` (a boolean), else None."""
        entry = self._old_summaries.get(name)
        self._asked.add(name)
        if digest is None or not isinstance(entry, list) or len(entry) != 2 \
                or entry[0] != digest or not isinstance(entry[1], bool):
            return None
        self._summaries[name] = entry
        return entry[1]

    def put_summary(self, name: str, digest: str | None, fact: bool) -> None:
        if digest is not None:
            self._summaries[name] = [digest, bool(fact)]

    def carry(self, rels: list[str]) -> None:
        """Keep every fact held about `rels` whose key matches the listing (unchecked: they
        are checked again when used)."""
        for rel in rels:
            entry = self._old.get(rel)
            if isinstance(entry, list) and len(entry) == 2 and isinstance(entry[1], dict) \
                    and entry[0] == _key(self.listing.get(rel) or {}) and rel not in self._new:
                self._new[rel] = entry

    def _names(self, fact: Any) -> list | None:
        """The column names of a `columns` fact: its list, or the list its number names."""
        names = fact[1] if isinstance(fact, list) and len(fact) == 2 else None
        if isinstance(names, int) and not isinstance(names, bool):
            names = self._shapes[names] if 0 <= names < len(self._shapes) else None
        return names if isinstance(names, list) else None

    def _packed(self) -> tuple[dict[str, Any], list[list]]:
        """The entries to write, column names as numbers into the returned list of
        distinct name lists."""
        shapes: list[list] = []
        number: dict[tuple, int] = {}
        out = {}
        for rel, (key, facts) in self._new.items():
            names = self._names(facts.get("columns"))
            if names is not None:
                n = number.setdefault(tuple(names), len(shapes))
                if n == len(shapes):
                    shapes.append(names)
                facts = {**facts, "columns": [facts["columns"][0], n]}
            out[rel] = [key, facts]
        return out, shapes

    def _keep(self, rel: str, key: list, kind: str, fact: Any) -> None:
        entry = self._new.get(rel)
        if entry is None or entry[0] != key:
            entry = self._new[rel] = [key, {}]
        entry[1][kind] = fact

    def save(self) -> None:
        """Write what this opening used and learnt, and kept facts of files still listed
        unchanged (a query naming other views keeps theirs; removed or changed files drop
        out); unwritten when that is what the file holds already. A folder that cannot be
        written leaves the index unwritten, never an error."""
        if self.path is None:
            return
        for name, entry in self._old_summaries.items():
            if name not in self._asked:
                self._summaries.setdefault(name, entry)
        if self._new != self._old:
            self.carry(list(self._old))
        if self._new == self._old and self._summaries == self._old_summaries:
            return
        entries, shapes = self._packed()
        doc = {"format": FORMAT, "store": self.url, "entries": entries, "shapes": shapes,
               "summaries": self._summaries}
        with contextlib.suppress(OSError, ValueError, TypeError):
            os.makedirs(os.path.dirname(self.path), mode=0o700, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=os.path.dirname(self.path), prefix=".index-")
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump(doc, f, separators=(",", ":"))
                os.replace(tmp, self.path)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)


def load(url: str) -> Index:
    """The index of store `url` (empty when there is none or it cannot be used)."""
    path = os.path.join(folder(), hashlib.sha256(url.encode()).hexdigest()[:32] + ".json")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
        with os.fdopen(fd, "rb") as f:
            if not _regular(f.fileno()):
                return Index(url, path)
            data = f.read(MAX_BYTES + 1)
        if len(data) > MAX_BYTES:
            return Index(url, path)
        doc = json.loads(data)
    except (OSError, ValueError, RecursionError):
        return Index(url, path)
    ok = (isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("store") == url
          and isinstance(doc.get("entries"), dict))
    summaries, shapes = (doc.get("summaries"), doc.get("shapes")) if ok else (None, None)
    return Index(url, path, doc["entries"] if ok else None,
                 summaries if isinstance(summaries, dict) else None,
                 shapes if isinstance(shapes, list) else None)


def _regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)
