"""Checkpoints: weights, optimizer, scheduler and RNG state as safetensors + JSON, no pickle.

A checkpoint folder holds `model.safetensors`, `state.safetensors` (optimizer and RNG
tensors), `state.json` (the rest) and, written last, `meta.json`: a folder without it is
an unfinished save and `load` refuses it. Restoring everything makes training resume
bitwise: same weights, same AdamW moments and step, same random draws.
"""

from __future__ import annotations

import json
import os
import random
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file as st_load_file
from safetensors.torch import save_file as st_save_file

from alignflow.artifacts import schemas, treecodec
from alignflow.artifacts.parquet_io import ArtifactRef, write_table
from alignflow.artifacts.store import Store
from alignflow.errors import SchemaError, StoreFileRefused

FORMAT = 1


@dataclass
class Checkpoint:
    """What `load` returns; feed the parts to `load_state_dict` / `restore_rng`."""

    model_state: dict[str, torch.Tensor]
    optimizer_state: dict[str, Any] | None = None
    scheduler_state: dict[str, Any] | None = None
    rng_state: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    bytes: int = 0

    def restore_rng(self) -> None:
        if self.rng_state is not None:
            restore_rng(self.rng_state)


def rng_state() -> dict[str, Any]:
    """torch CPU (and CUDA, if present), Python `random` and numpy global RNG states."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate(),
             "numpy": np.random.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def restore_rng(state: dict[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _weights(state: dict[str, torch.Tensor]) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    """CPU, contiguous tensors, each tied one (the same view of the same storage, like tied
    embeddings) written once: (tensors, {alias: name written}). Other storage-sharing
    tensors are cloned: safetensors refuses shared memory."""
    seen: dict[tuple, str] = {}
    storages: set[int] = set()
    out, tied = {}, {}
    for name, t in state.items():
        t = t.detach().cpu().contiguous()
        ptr = t.untyped_storage().data_ptr()
        view = (ptr, t.storage_offset(), tuple(t.shape), tuple(t.stride()), t.dtype)
        if t.numel() and view in seen:
            tied[name] = seen[view]
            continue
        out[name] = t.clone() if ptr in storages and t.numel() else t
        storages.add(ptr)
        seen.setdefault(view, name)
    return out, tied


def _write_safetensors(store: Store, rel: str, tensors: dict[str, torch.Tensor]) -> int:
    """Serialise straight to a file (never a bytes copy of the whole state in memory):
    locally a temp file beside the target (its folders made without following a link),
    renamed into place; elsewhere, uploaded."""
    folder = os.path.dirname(store.writable_path(rel)) if store.is_local else None
    with store._errors(rel):  # a read-only store: one line naming it
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=".safetensors")
    os.close(fd)
    try:
        with store._errors(rel):  # a full disk is one line naming the store
            st_save_file(tensors, tmp)
            size = os.path.getsize(tmp)
        store.put_file(tmp, rel)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return size


def _read_safetensors(store: Store, rel: str, size: int | None) -> dict[str, torch.Tensor]:
    """The tensors of `rel`: locally a regular file reached through no link, of the `size`
    its meta.json records (when it records one)."""
    if store.is_local:
        with store._errors(rel):
            return st_load_file(store.readable_path(rel, size))
    with tempfile.TemporaryDirectory(prefix="alignflow-ckpt-") as tmp:
        local = os.path.join(tmp, "x.safetensors")
        store.get_file(rel, local)
        return st_load_file(local)


def _recorded(meta: dict, name: str) -> int | None:
    """The size meta.json records for file `name` of the checkpoint, if any."""
    size = (meta.get("files") or {}).get(name) if isinstance(meta, dict) else None
    return size if isinstance(size, int) and not isinstance(size, bool) else None


def save(store: Store, rel_dir: str, model_state: dict[str, torch.Tensor], *,
         optimizer: torch.optim.Optimizer | None = None, scheduler: Any = None,
         rng: bool | dict[str, Any] = True, extra: dict[str, Any] | None = None) -> int:
    """Write a checkpoint folder at `rel_dir`; returns its size in bytes. `rng`: True saves
    the RNG state now, a dict is a state captured earlier (by `rng_state()`)."""
    tensors: dict[str, torch.Tensor] = {}
    rng_saved = rng_state() if rng is True else rng or None
    tree = {
        "optimizer": treecodec.encode(optimizer.state_dict(), tensors, "optimizer")
        if optimizer is not None else None,
        "scheduler": treecodec.encode(scheduler.state_dict(), tensors, "scheduler")
        if scheduler is not None else None,
        "rng": treecodec.encode(rng_saved, tensors, "rng") if rng_saved else None,
        "extra": treecodec.encode(extra or {}, tensors, "extra"),
    }
    weights, tied = _weights(model_state)
    sizes = {"model.safetensors": _write_safetensors(store, f"{rel_dir}/model.safetensors",
                                                     weights),
             "state.safetensors": _write_safetensors(store, f"{rel_dir}/state.safetensors",
                                                     tensors)}
    state_json = json.dumps(tree).encode()
    store.write_bytes(f"{rel_dir}/state.json", state_json)
    sizes["state.json"] = len(state_json)
    store.write_json(f"{rel_dir}/meta.json", {"format": FORMAT, "files": sizes, "tied": tied,
                                              "saved": time.time()})
    return sum(sizes.values())


def load(store: Store, rel_dir: str) -> Checkpoint:
    """Read a checkpoint folder written by `save`."""
    try:
        meta = store.read_json(f"{rel_dir}/meta.json")
    except FileNotFoundError:
        raise SchemaError(f"{store.url}/{rel_dir}: no meta.json; not a checkpoint or an "
                          "unfinished save") from None
    if meta.get("format") != FORMAT:
        raise SchemaError(f"{store.url}/{rel_dir}/meta.json: format {meta.get('format')!r}, "
                          f"expected {FORMAT}")
    try:
        model = _read_safetensors(store, f"{rel_dir}/model.safetensors",
                                  _recorded(meta, "model.safetensors"))
        tensors = _read_safetensors(store, f"{rel_dir}/state.safetensors",
                                    _recorded(meta, "state.safetensors"))
        tree = treecodec.decode(store.read_json(f"{rel_dir}/state.json"), tensors)
    except StoreFileRefused:
        raise
    except (ValueError, KeyError, RuntimeError, SafetensorError) as exc:
        raise SchemaError(f"{store.url}/{rel_dir}: corrupt checkpoint ({exc})") from None
    for alias, name in (meta.get("tied") or {}).items():
        model[alias] = model[name]
    return Checkpoint(model, tree["optimizer"], tree["scheduler"], tree["rng"], tree["extra"],
                      sum(meta["files"].values()))


def load_model_state(store: Store, rel_dir: str) -> dict[str, torch.Tensor]:
    """Only the weights of a checkpoint folder (a generator needs no optimizer state)."""
    if not store.exists(f"{rel_dir}/meta.json"):
        raise SchemaError(f"{store.url}/{rel_dir}: no meta.json; not a checkpoint or an "
                          "unfinished save")
    size = _recorded(store.read_json(f"{rel_dir}/meta.json"), "model.safetensors")
    try:
        return _read_safetensors(store, f"{rel_dir}/model.safetensors", size)
    except (ValueError, KeyError, RuntimeError, SafetensorError) as exc:
        raise SchemaError(f"{store.url}/{rel_dir}: corrupt checkpoint ({exc})") from None


def index_table(*, run_id: str, task_key: str, step: int, path: str, kind: str,
                policy_version: int | None = None, nbytes: int | None = None,
                ts: float | None = None) -> pa.Table:
    """One `checkpoints` row (for the catalog's checkpoints view)."""
    row = {"run_id": run_id, "task_key": task_key, "step": step, "path": path, "kind": kind,
           "policy_version": policy_version, "bytes": nbytes,
           "ts": time.time() if ts is None else ts}
    return pa.Table.from_pylist([row], schema=schemas.CHECKPOINTS.arrow_schema)


def write_index(store: Store, *, run_id: str, task_key: str, step: int, path: str, kind: str,
                policy_version: int | None = None, nbytes: int | None = None) -> ArtifactRef:
    """Stage the index row of a saved checkpoint as a `checkpoints` data file."""
    table = index_table(run_id=run_id, task_key=task_key, step=step, path=path, kind=kind,
                        policy_version=policy_version, nbytes=nbytes)
    return write_table(store, schemas.CHECKPOINTS, table, run_id=run_id,
                       task=task_key.replace("/", "-"), partition={"iter": step})
