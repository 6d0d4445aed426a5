"""The store layer reads only bounded, regular files and writes only under its own root
(issue 20 §2, §4): a link, FIFO, oversized file or deeply nested JSON is refused in one line
naming it, before it is opened, followed or parsed; nothing is written through a link."""

from __future__ import annotations

import json
import os

import pytest

from alignflow.artifacts import bounds
from alignflow.artifacts.layout import enclosing_store
from alignflow.errors import StoreFileRefused

pytestmark = pytest.mark.timeout(20)
LINK = "is a symbolic link; a store holds only regular files and folders, and alignflow never " \
       "follows a link in it"


@pytest.fixture
def outside(tmp_path):
    """A folder outside the store with a file a link attack would replace."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "config.json").write_text('{"mine": true}')
    return folder


def _untouched(outside) -> None:
    assert sorted(os.listdir(outside)) == ["config.json"]
    assert (outside / "config.json").read_text() == '{"mine": true}'


def test_a_link_to_dev_zero_is_refused_unread(local_store, bounded_memory):
    local_store.write_json("runs/a/run.json", {"run_id": "a"})
    os.unlink(local_store.path("runs/a/run.json"))
    os.symlink("/dev/zero", local_store.path("runs/a/run.json"))
    with pytest.raises(StoreFileRefused, match=rf"^{local_store.url}/runs/a/run\.json {LINK} "
                                               r"\(reading refused\)$"):
        local_store.read_json("runs/a/run.json")
    assert local_store.list("runs") == ["runs/a/run.json"]
    assert local_store.find("runs")["runs/a/run.json"]["type"] == "a symbolic link"


def test_a_fifo_is_refused_without_waiting_for_a_writer(local_store):
    os.makedirs(local_store.path("runs/a/tasks"))
    os.mkfifo(local_store.path("runs/a/tasks/x.json"))
    with pytest.raises(StoreFileRefused, match=r"runs/a/tasks/x\.json is a FIFO; a store holds"):
        local_store.read_bytes("runs/a/tasks/x.json")
    got = local_store.read_many(["runs/a/tasks/x.json"])
    assert isinstance(got["runs/a/tasks/x.json"], StoreFileRefused)


def test_a_file_past_its_kind_limit_is_refused_unread(fast_store):
    fast_store.write_bytes("runs/a/run.json", b" " * (bounds.RECORD_BYTES + 1) + b"{}")
    with pytest.raises(StoreFileRefused, match=r"runs/a/run\.json is (4 MiB|more than 4 MiB); "
                                               r"a file of this kind is at most 4 MiB"):
        fast_store.read_json("runs/a/run.json")
    fast_store.write_bytes("runs/a/logs/t.log", b"x" * 100)
    assert fast_store.read_bytes("runs/a/logs/t.log", limit=100) == b"x" * 100
    with pytest.raises(StoreFileRefused, match="at most 99 B"):
        fast_store.read_bytes("runs/a/logs/t.log", limit=99)


def test_a_sparse_huge_file_costs_nothing_to_refuse(local_store, bounded_memory):
    local_store.write_bytes("runs/a/run.json", b"{}")
    os.truncate(local_store.path("runs/a/run.json"), 50 * 2**30)  # 50 GiB, no blocks
    with pytest.raises(StoreFileRefused, match=r"is 50 GiB; a file of this kind is at most"):
        local_store.read_json("runs/a/run.json")


@pytest.mark.parametrize(("depth", "ok"), [(bounds.MAX_DEPTH, True),
                                           (bounds.MAX_DEPTH + 1, False), (1_000_000, False)])
def test_json_nesting_is_bounded(fast_store, depth, ok):
    fast_store.write_bytes("runs/a/run.json", b"[" * depth + b"]" * depth)
    if ok:
        assert bounds.depth(fast_store.read_json("runs/a/run.json")) == depth
        return
    with pytest.raises(StoreFileRefused, match=rf"runs/a/run\.json nests JSON more than "
                                               rf"{bounds.MAX_DEPTH} levels deep"):
        fast_store.read_json("runs/a/run.json")


def test_limits_by_kind():
    assert bounds.limit_for("runs/a/run.json") == bounds.RECORD_BYTES
    assert bounds.limit_for("runs/a/tasks/iter-0001/learn.json") == bounds.RECORD_BYTES
    assert bounds.limit_for("runs/a/tasks/round-0000/run.json") == bounds.RECORD_BYTES
    assert bounds.limit_for("runs/a/journal.json") == bounds.JOURNAL_BYTES
    assert bounds.limit_for("runs/a/logs/iter-0001/learn.log") == bounds.LOG_BYTES
    assert bounds.limit_for("runs/a/final/actor/tokenizer.json") == bounds.JSON_BYTES
    assert bounds.limit_for("runs/a/final/actor/model.safetensors") >= 2**30


@pytest.mark.parametrize("write", ["write_bytes", "create_json", "put_file", "writable_path"])
def test_writes_never_go_through_a_linked_folder(local_store, outside, write, tmp_path):
    local_store.write_json("runs/a/run.json", {"run_id": "a"})
    os.symlink(outside, local_store.path("runs/a/final"))
    staged = tmp_path / "staged.json"
    staged.write_text("{}")
    calls = {"write_bytes": lambda rel: local_store.write_bytes(rel, b"{}"),
             "create_json": lambda rel: local_store.create_json(rel, {}),
             "put_file": lambda rel: local_store.put_file(str(staged), rel),
             "writable_path": local_store.writable_path}
    with pytest.raises(StoreFileRefused, match=rf"^{local_store.url}/runs/a/final {LINK} "
                                               r"\(writing refused\)$"):
        calls[write]("runs/a/final/config.json")
    _untouched(outside)


def test_a_linked_file_is_not_written_through(local_store, outside):
    os.makedirs(local_store.path("runs/a"))
    os.symlink(outside / "config.json", local_store.path("runs/a/run.json"))
    with pytest.raises(StoreFileRefused, match=r"runs/a/run\.json is a symbolic link"):
        local_store.write_json("runs/a/run.json", {"run_id": "a"})
    _untouched(outside)


def test_put_file_copies_across_disks_and_stays_inside(local_store, tmp_path, monkeypatch):
    import errno

    real = os.replace

    def cross_device(src, dst, **kw):
        if kw.get("src_dir_fd") is None:
            raise OSError(errno.EXDEV, "Invalid cross-device link")
        return real(src, dst, **kw)

    monkeypatch.setattr(os, "replace", cross_device)
    src = tmp_path / "model.bin"
    src.write_bytes(b"weights")
    local_store.put_file(str(src), "runs/a/final/actor/model.bin")
    assert local_store.read_bytes("runs/a/final/actor/model.bin") == b"weights"
    assert not src.exists()


def test_listing_and_deleting_never_follow_a_link(local_store, outside):
    local_store.write_json("runs/a/run.json", {"run_id": "a"})
    os.symlink(outside, local_store.path("runs/a/junk"))
    os.symlink("..", local_store.path("runs/a/loop"))  # a loop: listed once, never walked
    assert local_store.list("runs") == ["runs/a/junk", "runs/a/loop", "runs/a/run.json"]
    assert local_store.list("runs/a/junk") == ["runs/a/junk"]
    assert local_store.list("runs/a/junk/config.json") == []  # below a link: nothing
    local_store.delete("runs/a/junk", recursive=True)  # the link itself goes
    _untouched(outside)
    os.symlink(outside, local_store.path("runs/a/junk"))
    with pytest.raises(StoreFileRefused, match=r"runs/a/junk is a symbolic link.*deleting"):
        local_store.delete("runs/a/junk/config.json")
    _untouched(outside)


def test_readable_path_checks_the_recorded_size(local_store):
    local_store.write_bytes("runs/a/x.parquet", b"12345")
    assert local_store.readable_path("runs/a/x.parquet", 5).endswith("runs/a/x.parquet")
    with pytest.raises(StoreFileRefused, match=r"runs/a/x\.parquet has 5 bytes; its manifest "
                                               r"records 6 \(changed after its commit"):
        local_store.readable_path("runs/a/x.parquet", 6)


def test_a_folder_a_user_names_inside_the_store_is_made_through_no_link(local_store, outside):
    local_store.write_json("runs/a/run.json", {"run_id": "a"})
    os.symlink(outside, local_store.path("runs/a/tb"))
    with pytest.raises(StoreFileRefused, match=r"runs/a/tb is a symbolic link"):
        local_store.local_folder(local_store.path("runs/a/tb/a"))
    elsewhere = str(outside / "tb")
    assert local_store.local_folder(elsewhere) == elsewhere  # outside: the user's choice


def test_a_store_is_recognised_by_its_layout(local_store, tmp_path):
    local_store.write_json("runs/a/run.json", json.loads('{"run_id": "a"}'))
    inside = local_store.path("runs/a/rollouts/iter=0/x.parquet")
    assert enclosing_store(inside) == local_store.root
    assert enclosing_store(str(tmp_path / "result.csv")) is None
    os.symlink(local_store.path("runs/a"), tmp_path / "via")
    assert enclosing_store(str(tmp_path / "via" / "x.parquet")) == local_store.root
