"""Store backends: one class per way of reaching a store root, behind `base.Backend`.

A fourth backend is one subclass of `Backend` (or `FsspecBackend`) and one line here.
"""

from __future__ import annotations

from typing import Any

from alignflow.artifacts.backends.base import Backend
from alignflow.artifacts.backends.local import LocalBackend
from alignflow.artifacts.backends.memory import MemoryBackend
from alignflow.artifacts.backends.s3 import S3Backend
from alignflow.artifacts.urls import parse_url

BACKENDS: dict[str, type[Backend]] = {cls.protocol: cls for cls in
                                      (LocalBackend, S3Backend, MemoryBackend)}


def open_backend(url: str, options: dict[str, Any]) -> Backend:
    """The backend of store `url` (`urls.parse_url` refuses a scheme no backend speaks)."""
    protocol, root = parse_url(url)
    return BACKENDS[protocol](url, root, options)
