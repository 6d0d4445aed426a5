"""Store URLs: a local path, `file://`, `memory://` or `s3://bucket/prefix`, and the fresh
fsspec filesystem each is read and written through."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from alignflow.errors import ConfigError

if TYPE_CHECKING:
    import fsspec


def parse_url(url: str) -> tuple[str, str]:
    """`url` → (protocol, root path inside that filesystem)."""
    if url.startswith("s3://"):
        root = url[len("s3://"):].strip("/")
        if not root:
            raise ConfigError(f"store URL {url!r} names no bucket; expected s3://bucket/prefix")
        return "s3", root
    if url.startswith("memory://"):
        return "memory", "/" + url[len("memory://"):].strip("/")
    if url.startswith("file://"):
        url = url[len("file://"):]
    elif "://" in url:
        raise ConfigError(f"store URL {url!r}: expected a local path, file://, memory:// or s3://")
    return "file", os.path.abspath(os.path.expanduser(url))


def filesystem(protocol: str, options: dict[str, Any]) -> fsspec.AbstractFileSystem:
    """A fresh filesystem (no fsspec instance cache, so credentials are never stale);
    fsspec (~0.04 CPU s with asyncio) is imported here, when a store first needs it."""
    import fsspec

    options = dict(options)
    if protocol == "s3":
        endpoint = os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL")
        if endpoint and "endpoint_url" not in options:
            options["endpoint_url"] = endpoint
        options.setdefault("use_listings_cache", False)  # other processes write too
    if protocol == "file":
        options.setdefault("auto_mkdir", True)
    return fsspec.filesystem(protocol, skip_instance_cache=True, **options)
