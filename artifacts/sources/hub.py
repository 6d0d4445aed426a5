"""Hugging Face Hub ids: resolved from the local HF cache when offline (`HF_HUB_OFFLINE=1`,
alignflow's default in tests and images) and downloaded once per node into it when
online. The token is `huggingface_hub`'s own (`HF_TOKEN` from the environment): alignflow
never passes, stores or logs it (`artifacts/redact.py` masks it wherever text is written).

A snapshot folder is named by its commit, which never changes its files, so its content
hash is computed once per node and kept in the sources index (`cache.py`); a run pins the
commit with the hash, so every node loads that commit even after the branch moved.
"""

from __future__ import annotations

from pathlib import Path

from alignflow.artifacts.sources.cache import Fetched, read_index, write_index
from alignflow.artifacts.sources.hashing import content_hash, inventory
from alignflow.errors import ConfigError


def offline() -> bool:
    """Whether `huggingface_hub` may reach the Hub in this process."""
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def _why(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160]}" if text else type(exc).__name__


def snapshot(repo: str, revision: str | None = None) -> Path:
    """The local snapshot folder of `repo` (downloaded first when online)."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo, revision=revision, local_files_only=offline()))
    except Exception as exc:  # not cached, unknown repo, no network, gated: one line
        where = ("not in the local Hugging Face cache (offline: HF_HUB_OFFLINE=1)"
                 if offline() else "could not be downloaded from the Hugging Face Hub")
        raise ConfigError(f"model {repo!r} is {where} ({_why(exc)})") from None


def fetch_hub(repo: str, expected: str | None = None, revision: str | None = None) -> Fetched:
    """`repo`'s snapshot on this node and its content hash: at `revision` (the commit a run
    pinned), else at the commit this node last saw with content `expected`, else the
    branch's head. A pinned commit keeps its bytes however the branch moves."""
    if revision is None and expected:
        known = read_index(f"hub:{repo}#{expected}")
        revision = known["fingerprint"] if known else None
    folder = snapshot(repo, revision)
    commit = folder.name
    found = read_index(f"hub:{repo}@{commit}")
    sha = found["sha256"] if found else content_hash(inventory(folder))
    if not found:
        write_index(f"hub:{repo}@{commit}", commit, sha)
        write_index(f"hub:{repo}#{sha}", commit, sha)
    return Fetched(folder, sha, commit)


def read_hub_member(repo: str, name: str) -> bytes:
    """One small file of `repo` (its config.json), without the weights."""
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo, name, local_files_only=offline())).read_bytes()
    except Exception as exc:
        where = "the local Hugging Face cache" if offline() else "the Hugging Face Hub"
        raise ConfigError(f"model {repo!r}: {name} not found in {where} ({_why(exc)})") from None
