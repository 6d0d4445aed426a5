"""Local copies of model folders that live in a remote store (a round's exported policy
on S3), so round runs and the gate load them like any local folder."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from alignflow.artifacts.store import Store
from alignflow.flows.campaign.inputs import cache_dir
from alignflow.flows.campaign.records import Policy


def policy_folder(store: Store, policy: Policy) -> str:
    """A local folder (or model name) to load `policy` from: the initial policy as the
    config names it; a round's export from the store (copied once when remote)."""
    if policy.round is None:
        return policy.path
    return store.path(policy.path) if store.is_local else local_copy(store, policy.path)


def local_copy(store: Store, rel: str) -> str:
    """The folder `rel` of `store`, downloaded once (a complete copy or none)."""
    key = hashlib.sha256(f"{store.url}|{rel}".encode()).hexdigest()[:16]
    target = cache_dir().parent / "campaign-models" / key
    if target.exists():
        return str(target)
    tmp = target.with_name(f".{key}.part")
    shutil.rmtree(tmp, ignore_errors=True)
    for path in store.list(rel):
        dest = tmp / path[len(rel.rstrip("/")) + 1:]
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(store.read_bytes(path))
    os.replace(tmp, target)
    return str(Path(target))
