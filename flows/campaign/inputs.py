"""The growing prompt source of a campaign: a local folder or an `s3://` prefix.

`new_files` lists the source less the files earlier rounds consumed (the flow passes
those, from the journal), and `record` commits which round consumes them, so each file
feeds exactly one round, across restarts too: once `round-NNNN/inputs` is committed, a
resumed driver replays its list.
Round runs read local paths: S3 files are copied once into a local cache folder.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
from pathlib import Path

import pyarrow as pa

from alignflow.artifacts.lineage import INPUTS
from alignflow.artifacts.scope import current_scope
from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError
from alignflow.flows.campaign.records import InputFile, Inputs


def _source(source: str) -> Store:
    """The source as a store root (same S3 settings as stores: AWS env, endpoint)."""
    if "://" not in source and not os.path.isdir(os.path.expanduser(source)):
        raise ConfigError(f"inputs.source={source!r}: no such folder")
    return Store.open(source)


def list_source(source: str, pattern: str) -> list[InputFile]:
    """Files under `source` whose name matches `pattern`, sorted by path (hidden files and
    names starting with '.' or '_' — e.g. uploads in progress — are left out)."""
    src = _source(source)
    out = []
    for path, info in sorted(src.fs.find(src.root, detail=True).items()):
        name = path.rsplit("/", 1)[-1]
        if name.startswith((".", "_")) or not fnmatch.fnmatch(name, pattern):
            continue
        stamp = info.get("ETag") or info.get("mtime") or info.get("LastModified")
        url = src.path(src.rel(path)) if src.is_local else f"{src.url.rstrip('/')}/{src.rel(path)}"
        out.append(InputFile(url, int(info.get("size") or 0), str(stamp)))
    return out


def new_files(source: str, pattern: str, consumed: list[str]) -> list[InputFile]:
    """The source's files that no earlier round consumed, in path order."""
    seen = set(consumed)
    return [f for f in list_source(source, pattern) if f.path not in seen]


def record(files: list[InputFile], round_: int, due: float, round_run: str) -> Inputs:
    """Commit one `campaign_inputs` row per file: this round consumed it."""
    scope, n = current_scope(), len(files)
    scope.write(INPUTS, pa.table({
        "run_id": [scope.run_id] * n, "task_key": [scope.task_key] * n, "round": [round_] * n,
        "due": [due] * n, "path": [f.path for f in files], "size": [f.size for f in files],
        "stamp": [f.stamp for f in files], "round_run": [round_run] * n}))
    return Inputs(tuple(files))


def cache_dir() -> Path:
    from platformdirs import user_cache_dir

    return Path(os.environ.get("ALIGNFLOW_CAMPAIGN_CACHE") or
                Path(user_cache_dir("alignflow")) / "campaign-inputs")


def local_paths(files: tuple[InputFile, ...]) -> list[str]:
    """Local paths of the files (S3 objects are downloaded once, keyed by URL and stamp)."""
    out = []
    for f in files:
        if not f.path.startswith("s3://"):
            out.append(f.path)
            continue
        key = hashlib.sha256(f"{f.path}|{f.stamp}".encode()).hexdigest()[:16]
        target = cache_dir() / key / f.path.rsplit("/", 1)[-1]
        if not target.exists():
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp = target.with_name(f".{target.name}.part")
            folder, _, name = f.path.rpartition("/")
            tmp.write_bytes(Store.open(folder).read_bytes(name))
            os.replace(tmp, target)
        out.append(str(target))
    return out
