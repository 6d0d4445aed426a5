"""What each process of a simulated cluster saw: its node, the fake GPUs Ray gave it
(`CUDA_VISIBLE_DEVICES`), the device it believes it has, its actor and rank. Each process
writes one small JSON file into the cluster's folder when it settles its device; the
driver collects them (into run.json's `simulated` record, and for the tests' asserts).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from alignflow.tasks.simulate import node

FOLDER = "sightings"
_SEEN: set[tuple[str, str]] = set()  # (kind, device) already written by this process


def record(kind: str, device: str) -> None:
    """Write this process's sighting (once per kind and device); a no-op off a simulated
    cluster. `kind`: what settled its device (a host, an engine)."""
    folder = os.environ.get(node.ENV_DIR)
    if node.index() is None or not folder or (kind, device) in _SEEN:
        return
    _SEEN.add((kind, device))
    row = {"kind": kind, "device": device, "node": node.index(),
           "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", ""),
           "gpu": node.physical_device(), "pid": os.getpid(), "time": time.time(),
           "rank": _int_env("RANK"), "world_size": _int_env("WORLD_SIZE"), **_ray_context()}
    out = Path(folder, FOLDER)
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{os.getpid()}-{len(_SEEN)}.tmp"
    tmp.write_text(json.dumps(row, sort_keys=True))
    tmp.rename(out / f"{os.getpid()}-{len(_SEEN)}.json")


def collect(folder: str | os.PathLike, *, clear: bool = False) -> list[dict]:
    """Every sighting written into `folder`, oldest first (removed with `clear`)."""
    rows = []
    for path in sorted(Path(folder, FOLDER).glob("*.json")):
        rows.append(json.loads(path.read_text()))
        if clear:
            path.unlink()
    return sorted(rows, key=lambda r: (r["time"], r["pid"]))


def _int_env(name: str) -> int | None:
    value = os.environ.get(name, "")
    return int(value) if value.isdigit() else None


def _ray_context() -> dict:
    """The Ray actor and node of this process (Ray sets them; nothing without Ray)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return {"actor": None, "ray_node": None}
    ctx = ray.get_runtime_context()
    try:
        actor = ctx.get_actor_name()
    except Exception:  # not an actor
        actor = None
    return {"actor": actor, "ray_node": ctx.get_node_id(),
            "gpu_ids": [str(g) for g in ray.get_gpu_ids()]}
