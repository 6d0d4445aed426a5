"""Content stamps of local inputs, so cached tasks keyed on a path notice edited files.

The engine's cache keys a task on its arguments; a dataset file or model folder passed by
path keeps its name when edited. The flow passes `fingerprint(...)` as an extra argument:
(relative path, size, mtime) of every file under each existing local path, hashed. Names
that are not local paths (hub names, `alignflow:` datasets, prepared models) stamp as
themselves.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def _stamps(path: Path) -> list[str]:
    files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
    out = []
    for f in files:
        st = f.stat()
        out.append(f"{f.relative_to(path) if f != path else f.name}:{st.st_size}:{st.st_mtime_ns}")
    return out


def _paths(part: str) -> list[Path]:
    """The local paths a spec part names: itself, or OpenRLHF's `json@DIR` / `FOLDER@SUB`."""
    path = Path(os.path.expanduser(part))
    if not part or path.exists():
        return [path] if part else []
    name, _, sub = part.partition("@")
    both = (Path(os.path.expanduser(sub)), Path(os.path.expanduser(name)) / sub)
    return [p for p in both if sub and p.exists()][:1]


def fingerprint(*specs: str | None) -> str:
    """sha256 over each spec (comma-separated lists allowed) and its local files' stamps."""
    h = hashlib.sha256()
    for spec in specs:
        for part in (spec or "").split(","):
            part = part.strip()
            h.update(part.encode())
            for path in _paths(part):
                h.update("\n".join(_stamps(path)).encode())
    return h.hexdigest()
