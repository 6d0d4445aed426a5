"""A source's identity is its content: sha256 over the sorted list of (relative path, file
sha256). Two folders with the same files hash alike wherever they came from; one changed
byte or renamed file gives another hash."""

from __future__ import annotations

import hashlib
from pathlib import Path

BLOCK = 1 << 20


def file_sha256(path: str | Path) -> str:
    """sha256 of a file's bytes, read in blocks (models are large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def inventory(folder: str | Path, skip: tuple[str, ...] = ()) -> dict[str, dict]:
    """Relative path -> {bytes, sha256} of every file under `folder` (links followed: the
    HF cache links its snapshots to blobs), names in `skip` left out."""
    folder = Path(folder)
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.name not in skip)
    return {p.relative_to(folder).as_posix(): {"bytes": p.stat().st_size,
                                               "sha256": file_sha256(p)} for p in files}


def content_hash(files: dict[str, dict]) -> str:
    """sha256 over the sorted (relative path, file sha256) list of an `inventory`."""
    lines = "".join(f"{rel}\0{files[rel]['sha256']}\n" for rel in sorted(files))
    return hashlib.sha256(lines.encode()).hexdigest()


def listing_fingerprint(entries: dict[str, tuple[int, str]]) -> str:
    """sha256 of a remote listing (path -> (size, ETag or mtime)): when it is unchanged the
    content is, so a known listing needs no download to be identified."""
    lines = "".join(f"{rel}\0{size}\0{stamp}\n" for rel, (size, stamp) in sorted(entries.items()))
    return hashlib.sha256(lines.encode()).hexdigest()
