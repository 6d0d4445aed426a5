"""DuckDB's spill folder: private to one catalog, and never left behind.

DuckDB spills to a folder made for each catalog (mode 0700) instead of its default `./.tmp`:
DuckDB may always read its temp folder, so it must hold nothing but its own spill files.
The folder is removed when the catalog closes, which `alignflow sql` makes happen on
Ctrl-C, SIGTERM and SIGHUP too, or, when it has to end by force, `remove_own` does
(`catalog/process.py`). A process killed outright (SIGKILL, the
OOM killer) cannot clean up, so its folder names its process id and the next catalog opened
by the same user removes the folders of processes that are gone.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile

PREFIX = "alignflow-sql-"
_OURS = re.compile(rf"^{PREFIX}(\d+)-")


def private_temp_dir() -> str:
    """A fresh folder only this user can read (mkdtemp makes it 0700), named after this
    process; the folders dead processes left are removed first."""
    remove_orphans()
    return tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-")


def remove_temp_dir(path: str) -> None:
    shutil.rmtree(path, ignore_errors=True)


def remove_own(folder: str | None = None) -> None:
    """Remove every spill folder of this process: it is ending without closing its
    catalogs (catalog/process.py)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder or tempfile.gettempdir()):
            match = _OURS.match(entry.name)
            if match and int(match.group(1)) == os.getpid():
                remove_temp_dir(entry.path)


def remove_orphans(folder: str | None = None) -> list[str]:
    """Remove the spill folders of this user's processes that no longer run; returns them."""
    folder = folder or tempfile.gettempdir()
    gone = []
    with contextlib.suppress(OSError):
        for entry in os.scandir(folder):
            match = _OURS.match(entry.name)
            if not match or not entry.is_dir(follow_symlinks=False):
                continue
            if entry.stat(follow_symlinks=False).st_uid != os.getuid():
                continue
            if not _alive(int(match.group(1))):
                remove_temp_dir(entry.path)
                gone.append(entry.path)
    return gone


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, another user's
        return True
    return True
