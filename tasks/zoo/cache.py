"""Build a model folder once, atomically, and know when a cached one can be trusted.

A folder is built in a temporary sibling and renamed into place, so readers never see a
half-written model. A marker file records the build key and each file's size and sha256;
a folder whose marker is missing, stale or disagrees with the files is rebuilt.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from alignflow.artifacts.sources.hashing import file_sha256 as _sha256
from alignflow.artifacts.sources.hashing import inventory

MARKER = ".alignflow-build.json"
_HASH_LIMIT = 32 * 2**20  # files above this are checked by size only (hashing is slow)


def _inventory(folder: Path) -> dict[str, dict]:
    return inventory(folder, skip=(MARKER,))


def is_built(folder: str | os.PathLike, key: str) -> bool:
    """True iff `folder` holds a complete build for `key` (marker, sizes, small-file hashes)."""
    folder = Path(folder)
    try:
        marker = json.loads((folder / MARKER).read_text())
    except (OSError, ValueError):
        return False
    if marker.get("key") != key:
        return False
    for rel, want in marker.get("files", {}).items():
        path = folder / rel
        if not path.is_file() or path.stat().st_size != want["bytes"]:
            return False
        if want["bytes"] <= _HASH_LIMIT and _sha256(path) != want["sha256"]:
            return False
    return bool(marker.get("files"))


def build_once(folder: str | os.PathLike, key: str, build: Callable[[Path], None]) -> Path:
    """Return `folder`, first running `build(tmp_dir)` and renaming it there unless built."""
    folder = Path(folder)
    if is_built(folder, key):
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.tmp-", dir=folder.parent))
    try:
        build(tmp)
        marker = {"key": key, "files": _inventory(tmp)}
        (tmp / MARKER).write_text(json.dumps(marker, indent=1, sort_keys=True))
        if folder.exists():
            if is_built(folder, key):  # another process won the race
                return folder
            shutil.rmtree(folder)
        os.rename(tmp, folder)
    except OSError:
        if is_built(folder, key):
            return folder
        raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def folder_bytes(folder: str | os.PathLike) -> int:
    """Total size of the files under `folder`."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())
