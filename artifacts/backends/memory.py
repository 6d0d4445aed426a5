"""A store in this process's memory (`memory://`): tests and throwaway runs. fsspec's
memory filesystem is process-global, so a commit checks and writes under one lock."""

from __future__ import annotations

import threading

from alignflow.artifacts.backends.base import FsspecBackend
from alignflow.artifacts.s3errors import translate_errors

_LOCK = threading.Lock()


class MemoryBackend(FsspecBackend):
    protocol = "memory"

    def create(self, rel: str, data: bytes) -> None:
        path = self.full(rel)
        with translate_errors(self.url, rel), _LOCK:
            if self.fs.exists(path):
                raise self.conflict(rel)
            self.fs.pipe_file(path, data)
