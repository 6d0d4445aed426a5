"""A driver that SIGKILLs itself during its N-th manifest commit, at a named point:
`python -m tests.faults.commit_killer STORE_URL POINT N [ENDPOINT]`.

Points: `before` / `after` the whole commit (any store), and inside a local store's commit:
`temp` (before the temp file is written), `link` (temp written and fsynced, not yet
linked), `linked` (linked, temp not yet removed), `dirsync` (temp removed, directory not
yet fsynced). The run is `blobs` of tests/flows_for_tests.py (no torch: a quick start),
run id `k`, seed 5.
"""

from __future__ import annotations

import os
import signal
import sys

from alignflow.artifacts import localfs
from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from tests import flows_for_tests as F

CFG = {"iters": 4, "rows": 16}


def main(url: str, point: str, nth: int, endpoint: str | None = None) -> None:
    commits = {"n": 0, "armed": False}

    def die() -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    def hook(where: str) -> None:
        if commits["armed"] and point == where:
            die()

    create, write_temp, link, fsync_dir = (Store.create_json, localfs._write_temp, os.link,
                                           localfs._fsync_dir)

    def create_json(self, rel, obj):
        manifest = "/tasks/" in rel
        if manifest:
            commits["n"] += 1
            commits["armed"] = commits["n"] == nth
            hook("before")
        create(self, rel, obj)
        if manifest:
            hook("after")
        commits["armed"] = False

    def temp(fd, tmp, data):
        hook("temp")
        return write_temp(fd, tmp, data)

    def os_link(src, dst, *a, **k):
        hook("link")
        link(src, dst, *a, **k)
        hook("linked")

    def dir_sync(fd):
        hook("dirsync")
        fsync_dir(fd)

    Store.create_json, localfs._write_temp = create_json, temp
    os.link, localfs._fsync_dir = os_link, dir_sync
    options = {"endpoint_url": endpoint} if endpoint else None
    api.run(F.blobs, CFG, store=Store.open(url, storage_options=options), run_id="k",
            seed=5, executor="inline")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], int(sys.argv[3]), *(sys.argv[4:5] or [None]))
