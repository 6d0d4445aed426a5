"""What marks a local folder as an alignflow store, so no command writes its own output
(a query result, a report) into one, whichever store it was asked about.

A store root holds `runs/`, whose run folders hold `run.json`, `tasks/` or a tombstone.
`enclosing_store` looks at every folder above a path, as given and with its links resolved,
and stops at the first that is laid out so.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any

from alignflow.artifacts.commit import TOMBSTONE
from alignflow.artifacts.s3errors import translate_errors
from alignflow.errors import StoreError

_RUN_MARKS = ("run.json", "tasks", TOMBSTONE)
_LOOK_AT = 1000  # run folders looked into per `runs/` (a store has one with a mark early)


def is_store(folder: str) -> bool:
    """Whether `folder` is laid out as a store root (see the module docstring)."""
    runs = os.path.join(folder, "runs")
    with contextlib.suppress(OSError), os.scandir(runs) as entries:
        for i, entry in enumerate(entries):
            if i >= _LOOK_AT:
                break
            if entry.is_dir() and any(os.path.lexists(os.path.join(entry.path, mark))
                                      for mark in _RUN_MARKS):
                return True
    return False


def enclosing_store(path: str) -> str | None:
    """The store root that `path` (a file that may not exist yet) would be written into,
    or None: checked along the path as given and along its resolved form."""
    given = os.path.abspath(os.path.expanduser(path))
    for start in dict.fromkeys((given, os.path.realpath(given))):
        folder = os.path.dirname(start)
        while True:
            if is_store(folder):
                return folder
            parent = os.path.dirname(folder)
            if parent == folder:
                break
            folder = parent
    return None


def require_store(store: Any) -> None:
    """`StoreError` (user) when `store` is not there to read: a local path that does not
    exist, an S3 bucket that does not exist (an empty prefix of a bucket is an empty store),
    so `ls` and `sql` never answer "no runs" for a typo."""
    with translate_errors(store.url):
        if store.protocol == "s3":
            bucket = store.root.split("/", 1)[0]
            if store.fs.exists(bucket):
                return
            where = f"S3 bucket {bucket!r} of {store.url} does not exist"
        elif os.path.exists(store.root) if store.is_local else store.fs.exists(store.root):
            return  # locally without fsspec: `alignflow sql` imports none
        else:
            where = f"no store at {store.url}: the path does not exist"
    err = StoreError(f"{where}; expected a store written by alignflow (--store URL or "
                     "$ALIGNFLOW_STORE)")
    err.kind = "user"
    raise err
