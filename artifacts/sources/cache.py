"""This node's cache of fetched sources: one folder per content hash, an index per URL.

    <dir>/content/<sha256>/...        the files, as the source holds them, and a marker
    <dir>/index/<sha256 of URL>.json  the URL's last listing fingerprint -> content hash
    <dir>/locks/<sha256 of URL>.lock  one fetch of a URL at a time on this node
`<dir>` is `$ALIGNFLOW_SOURCES_DIR`, else `<user cache>/alignflow/sources` (on Kubernetes,
point `XDG_CACHE_HOME` at an ephemeral volume). A folder is filled in a temporary sibling
and renamed into place once complete, so no reader sees half a model; its name is the hash
of what it holds, so a run that pinned that hash can use it without asking the source.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from platformdirs import user_cache_dir

from alignflow.artifacts.redact import redact
from alignflow.artifacts.sources.hashing import content_hash, inventory

MARKER = ".alignflow-source.json"


def sources_dir() -> Path:
    """The cache's root on this node."""
    env = os.environ.get("ALIGNFLOW_SOURCES_DIR")
    return Path(env) if env else Path(user_cache_dir("alignflow")) / "sources"


@dataclass(frozen=True)
class Fetched:
    """A source on this node: its local path (a folder, or the one file of a one-file
    source), content hash and the listing fingerprint it was identified by."""

    path: Path
    sha256: str
    fingerprint: str


def _key(source: str) -> str:
    return hashlib.sha256(source.encode()).hexdigest()


def lookup(sha256: str) -> Path | None:
    """The cached path of content `sha256` when complete (its marker and file sizes agree)."""
    folder = sources_dir() / "content" / sha256
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return None
    files = marker.get("files") or {}
    if marker.get("sha256") != sha256 or not files or any(
            not (folder / rel).is_file() or (folder / rel).stat().st_size != size
            for rel, size in files.items()):
        return None
    return folder / marker["file"] if marker.get("file") else folder


def read_index(source: str) -> dict | None:
    """What this node last learned of `source`: {fingerprint, sha256} (None: nothing)."""
    try:
        found = json.loads((sources_dir() / "index" / f"{_key(source)}.json").read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_index(source: str, fingerprint: str, sha256: str) -> None:
    folder = sources_dir() / "index"
    folder.mkdir(parents=True, exist_ok=True)
    tmp = folder / f".{_key(source)}.{os.getpid()}.tmp"
    tmp.write_text(json.dumps({"source": redact(source), "fingerprint": fingerprint,
                               "sha256": sha256}))
    os.replace(tmp, folder / f"{_key(source)}.json")


@contextlib.contextmanager
def locked(source: str) -> Iterator[None]:
    """One fetch of `source` at a time on this node (the others then find it cached)."""
    folder = sources_dir() / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / f"{_key(source)}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def staging() -> Iterator[Path]:
    """A temporary folder beside the content folders (same file system: renamed in)."""
    root = sources_dir() / "content"
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".fetch-", dir=root))
    try:
        yield tmp
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def admit(tmp: Path, source: str, fingerprint: str, single: str | None) -> Fetched:
    """Hash the complete download in `tmp`, rename it to its content folder (a folder
    already there is the same content: kept) and index `source` to it."""
    files = inventory(tmp)
    sha = content_hash(files)
    marker = {"sha256": sha, "file": single, "source": redact(source),
              "files": {rel: f["bytes"] for rel, f in files.items()}}
    (tmp / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True))
    if lookup(sha) is None:
        target = sources_dir() / "content" / sha
        shutil.rmtree(target, ignore_errors=True)  # an incomplete leftover
        os.rename(tmp, target)
    write_index(source, fingerprint, sha)
    return Fetched(lookup(sha) or tmp, sha, fingerprint)
