"""The bundle's manifest: every file with its size, sha256, distribution, version and how it
installs, plus what the bundle relies on the node for and what it leaves out.

The installer checks the files against it before touching the node, and the node check
reports the versions it promised; a plan (`--plan`, no downloads) writes the same document
with sizes and hashes left null, so the package list can be read and tested offline.
"""

from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path

from bench.gpu_bundle import pins
from bench.gpu_bundle.plan import Entry, Plan

FORMAT = 1
INSTALL_BY_KIND = {"wheel": "pip", "sdist": "pip", "project": "pip", "slim": "untar"}
TINY_MODEL = {"name": "tiny-llama", "recipe": "alignflow.tasks.zoo.tiny.build_tiny_model",
              "travels_as": "code in the alignflow wheel; built on the node (<1M params)"}


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def planned_path(entry: Entry) -> str:
    """Where an entry's file lies in the bundle (a wheel's full name is known once fetched)."""
    folder = "fallback" if entry.group != "core" else "wheels"
    if entry.kind == "slim":
        return f"slim/{entry.name}-{entry.version}.tar.xz"
    return f"{folder}/{entry.name.replace('-', '_')}-{entry.version}-*.whl"


def _file_entry(entry: Entry, path: str, bundle: Path | None) -> dict:
    real = bundle / path if bundle is not None else None
    return {"path": path, "name": entry.name, "version": entry.version, "kind": entry.kind,
            "group": entry.group, "install": INSTALL_BY_KIND[entry.kind],
            "needed_by": list(entry.needed_by),
            "bytes": real.stat().st_size if real else None,
            "sha256": sha256(real) if real else None}


def document(plan: Plan, paths: dict[tuple[str, str], str] | None = None,
             bundle: Path | None = None, slim: dict | None = None) -> dict:
    """The manifest; `paths` ((name, group) -> file in `bundle`) absent: the plan only."""
    files = [_file_entry(e, (paths or {}).get((e.name, e.group), planned_path(e)), bundle)
             for e in plan.entries]
    if bundle is not None:
        files.append({"path": "install.py", "name": "installer", "version": str(FORMAT),
                      "kind": "installer", "group": "core", "install": "none",
                      "needed_by": [], "bytes": (bundle / "install.py").stat().st_size,
                      "sha256": sha256(bundle / "install.py")})
    sizes = [f["bytes"] for f in files]
    return {"format": FORMAT, "planned_only": bundle is None,
            "built": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()) if bundle else None,
            "python": pins.PYTHON, "abi": pins.ABI, "platforms": list(pins.PLATFORMS),
            "limit_bytes": pins.LIMIT_BYTES,
            "total_bytes": sum(sizes) if bundle is not None else None,
            "files": files, "node": plan.node, "excluded": plan.excluded,
            "requirements_unread": plan.unread, "datasets_needs": pins.DATASETS_NEEDS,
            "slim": slim or {}, "model": TINY_MODEL}


def write(doc: dict, folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "manifest.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path
