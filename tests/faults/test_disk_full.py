"""Disk full on a local store: one clear line naming the store, the run resumable, no
partial file anywhere; after space is freed, `resume` finishes it with every task's rows
once. On a real 1 MiB tmpfs where the test may mount one (root), and always through a
wrapper that makes the store's writes fail with ENOSPC past a byte budget."""

from __future__ import annotations

import errno
import os
import subprocess

import pytest

from alignflow.artifacts import gc, localfs, parquet_io
from alignflow.artifacts.store import Store
from alignflow.catalog import Catalog
from alignflow.errors import AlignflowError
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests import flows_for_tests as F

pytestmark = pytest.mark.slow

CFG = {"iters": 6, "rows": 40_000}  # ~320 KB per task: the 1 MiB disk fills at task 3 or 4


def _mount(path, size: str) -> bool:
    os.makedirs(path, exist_ok=True)
    cmd = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]
    return subprocess.run(cmd, capture_output=True).returncode == 0


class _Device:
    """Counts bytes the store writes and fails past `limit` as a full device would."""

    def __init__(self, monkeypatch, limit: int) -> None:
        self.limit, self.used = limit, 0
        temp, stream = localfs._write_temp, parquet_io._stream

        def write_temp(fd, name, data):
            self._take(len(data) if isinstance(data, bytes) else 0, name)
            return temp(fd, name, data)

        def counted_stream(writer, data, schema, fill):
            rows = stream(writer, data, schema, fill)
            self._take(rows * 8, "a parquet file")
            return rows

        monkeypatch.setattr(localfs, "_write_temp", write_temp)
        monkeypatch.setattr(parquet_io, "_stream", counted_stream)

    def _take(self, nbytes: int, path: str) -> None:
        if self.used + nbytes > self.limit:
            raise OSError(errno.ENOSPC, "No space left on device", path)
        self.used += nbytes


@pytest.fixture(params=["tmpfs", "wrapper"])
def device(request, tmp_path, monkeypatch):
    """(store, free_space()) on a full-able device."""
    disk = tmp_path / "disk"
    if request.param == "tmpfs":
        if not _mount(disk, "1m"):
            pytest.skip("cannot mount a tmpfs here (not root); the wrapper case still runs")
        request.addfinalizer(lambda: subprocess.run(["umount", "-l", str(disk)]))
        grow = lambda: subprocess.run(["mount", "-o", "remount,size=16m", str(disk)],  # noqa: E731
                                      check=True)
    else:
        dev = _Device(monkeypatch, limit=1 << 20)
        grow = lambda: setattr(dev, "limit", 1 << 30)  # noqa: E731
    return Store.open(str(disk / "store")), grow


def test_disk_full_is_clear_resumable_and_leaves_nothing_half_written(device, monkeypatch):
    store, grow = device
    monkeypatch.setenv("ALIGNFLOW_RETRY_BASE", "0.01")
    with pytest.raises(AlignflowError) as info:
        api.run(F.blobs, CFG, store=store, run_id="d", executor="inline")
    text = str(info.value)
    assert "\n" not in text and "no space left on the device of store " in text, text
    assert "free some space, then `alignflow resume` the run" in text
    assert api.get_status("d", store=store) in (runs.FAILED, runs.RESUMABLE)
    committed = runs.read_manifests(store, "d")
    assert 0 < len(committed) < CFG["iters"]
    every = store.list("")
    assert not [p for p in every if p.rsplit("/", 1)[-1].startswith(".")], every  # no temps
    assert gc.find_orphans(store) == []  # no data file that a manifest does not list

    grow()
    assert len(api.resume("d", store=store)) == CFG["iters"]
    with Catalog(store) as cat:
        rows = cat.sql("SELECT task_key, count(*) AS n FROM metrics GROUP BY 1 ORDER BY 1")
    assert rows.column("n").to_pylist() == [CFG["rows"]] * CFG["iters"]
