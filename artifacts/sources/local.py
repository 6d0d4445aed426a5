"""Local models and data (a file, a folder, a shared volume) identified by their content,
like fetched sources, but read in place.

A run pins each local source's content hash when it starts (`flows/trust/sources.py`); a
resume reads it only if its bytes are still those. Hashing a 15 GB model folder on every
start would cost minutes, so this node remembers the last listing it hashed (path → file
sizes and modification times → content hash, in the sources cache's index): an unchanged
listing is identified without reading a byte; any changed size or time rehashes.
"""

from __future__ import annotations

import os
from pathlib import Path

from alignflow.artifacts.sources import cache
from alignflow.artifacts.sources.hashing import (
    content_hash,
    file_sha256,
    inventory,
    listing_fingerprint,
)

_INDEX_PREFIX = "local:"  # index keys of local sources, apart from URLs'


def looks_local(spec: str) -> bool:
    """A local path: spelled as one (`/`, `.`, `~`) or present on this machine."""
    spec = spec.strip()
    return bool(spec) and (spec.startswith(("/", ".", "~")) or
                           Path(spec).expanduser().exists())


def _listing(path: Path) -> dict[str, tuple[int, str]]:
    """rel → (size, mtime_ns) of every file the source holds (links followed, as read)."""
    if path.is_file():
        st = path.stat()
        return {"": (st.st_size, str(st.st_mtime_ns))}
    out = {}
    for p in sorted(path.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[p.relative_to(path).as_posix()] = (st.st_size, str(st.st_mtime_ns))
    return out


def identify_local(path: str, recorded: dict | None = None) -> tuple[str, str]:
    """(content sha256, listing fingerprint) of the local file or folder `path` (resolved);
    read only when neither `recorded` (the run's pin) nor this node's index knows its
    listing. `FileNotFoundError` when it is gone."""
    where = Path(path)
    if not where.exists():
        raise FileNotFoundError(path)
    fingerprint = listing_fingerprint(_listing(where))
    recorded = recorded or {}
    if recorded.get("fingerprint") == fingerprint and recorded.get("sha256"):
        return str(recorded["sha256"]), fingerprint
    known = cache.read_index(_INDEX_PREFIX + os.fspath(where))
    if known and known.get("fingerprint") == fingerprint and known.get("sha256"):
        return str(known["sha256"]), fingerprint
    sha = file_sha256(where) if where.is_file() else content_hash(inventory(where))
    cache.write_index(_INDEX_PREFIX + os.fspath(where), fingerprint, sha)
    return sha, fingerprint
