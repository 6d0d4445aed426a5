"""The store backend contract (issue 45): `Store` is one front over a backend class per way of
reaching a root (local, S3, memory), and every backend answers the same way. Runs over
memory and local here, and over S3 (moto's HTTP server) with the slow tests (`store`).
"""

from __future__ import annotations

import ast
import inspect
import pickle

import pytest

from alignflow.artifacts import bounds
from alignflow.artifacts import store as store_module
from alignflow.artifacts.backends import BACKENDS, open_backend
from alignflow.artifacts.backends.base import Backend
from alignflow.errors import CommitConflict, ConfigError, StoreFileRefused


def test_each_spelling_opens_its_backend(tmp_path):
    spellings = {str(tmp_path / "s"): "file", f"file://{tmp_path}/s": "file",
                 "memory://x": "memory", "s3://bucket/prefix": "s3"}
    for url, protocol in spellings.items():
        backend = open_backend(url, {})
        assert type(backend) is BACKENDS[protocol] and backend.protocol == protocol
        assert isinstance(backend, Backend) and backend.url == url


def test_no_store_method_branches_on_its_backend():
    """The front asks its backend; it never asks which backend it has."""
    tree = ast.parse(inspect.getsource(store_module.Store))
    props = {"protocol", "root", "fs", "local", "is_local", "reached"}
    asked = [f"{fn.name}: {ast.unparse(node)}"
             for fn in ast.walk(tree) if isinstance(fn, ast.FunctionDef) and fn.name not in props
             for node in ast.walk(fn)
             if isinstance(node, ast.Attribute) and node.attr in ("protocol", "is_local", "local")
             and isinstance(node.value, ast.Name) and node.value.id == "self"]
    assert asked == []


def test_bytes_round_trip_and_overwrite(store):
    assert not store.exists("runs/r/a.bin")
    store.write_bytes("runs/r/a.bin", b"one")
    store.write_bytes("runs/r/a.bin", b"two!")
    assert store.exists("runs/r/a.bin") and store.read_bytes("runs/r/a.bin") == b"two!"
    assert store.size("runs/r/a.bin") == 4
    store.write_bytes("runs/r/empty.bin", b"")
    assert store.read_bytes("runs/r/empty.bin") == b""  # S3 answers 416 to its ranged GET
    with store.open_file("runs/r/a.bin") as f:
        assert f.read() == b"two!"


def test_create_once(store):
    store.create_json("runs/r/tasks/a.json", {"v": 1})
    with pytest.raises(CommitConflict, match=r"/runs/r/tasks/a\.json is already committed"):
        store.create_json("runs/r/tasks/a.json", {"v": 2})
    assert store.read_json("runs/r/tasks/a.json") == {"v": 1}


def test_reads_are_bounded(store, monkeypatch):
    store.write_bytes("runs/r/big.bin", b"x" * 10)
    assert store.read_bytes("runs/r/big.bin", limit=10) == b"x" * 10
    with pytest.raises(StoreFileRefused, match=r"runs/r/big\.bin is .*at most 9 B \(not read\)"):
        store.read_bytes("runs/r/big.bin", limit=9)
    monkeypatch.setattr(bounds, "RECORD_BYTES", 8)  # runs/<id>/*.json: 8 bytes at most
    store.write_bytes("runs/r/small.json", b"{}")
    store.write_bytes("runs/r/large.json", b'{"k": 12345}')
    got = store.read_many(["runs/r/small.json", "runs/r/large.json", "runs/r/none.json"])
    assert got["runs/r/small.json"] == b"{}"
    assert isinstance(got["runs/r/large.json"], StoreFileRefused)
    assert isinstance(got["runs/r/none.json"], FileNotFoundError)


def test_listing_sorted_and_relative(store):
    for rel in ("runs/r/y/3.json", "runs/r/x/2.txt", "runs/r/x/1.json", "other/4.json"):
        store.write_bytes(rel, b"1")
    assert store.list("runs/r") == ["runs/r/x/1.json", "runs/r/x/2.txt", "runs/r/y/3.json"]
    assert store.list("", "*/4.json") == ["other/4.json"]
    found = store.find("runs/r/x")
    assert sorted(found) == ["runs/r/x/1.json", "runs/r/x/2.txt"]
    assert {(i["type"], i["size"]) for i in found.values()} == {("file", 1)}
    assert store.find("runs/none") == {}


def test_delete_file_and_folder(store):
    for rel in ("runs/r/a.json", "runs/r/sub/b.json", "runs/keep.json"):
        store.write_bytes(rel, b"1")
    store.delete("runs/r/a.json")
    assert not store.exists("runs/r/a.json")
    store.delete("runs/r", recursive=True)
    assert store.list("runs") == ["runs/keep.json"]


def test_files_in_and_out(store, tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(b"payload")
    store.put_file(str(src), "runs/r/p.bin")
    store.get_file("runs/r/p.bin", str(tmp_path / "back.bin"))
    assert (tmp_path / "back.bin").read_bytes() == b"payload"


def test_paths_stay_below_the_root(store):
    for bad in ("../x.json", "runs/../../x.json"):
        with pytest.raises(ConfigError, match="leaves the store root"):
            store.read_bytes(bad)
        with pytest.raises(ConfigError, match="leaves the store root"):
            store.write_bytes(bad, b"1")
    assert store.rel(store.path("runs/r/a.json")) == "runs/r/a.json"


def test_local_paths_only_on_a_local_store(store, tmp_path):
    store.write_bytes("runs/r/a.bin", b"abc")
    if not store.is_local:
        for ask in (lambda: store.writable_path("runs/r/b.bin"),
                    lambda: store.readable_path("runs/r/a.bin")):
            with pytest.raises(ConfigError, match="has no local path"):
                ask()
        assert store.local is None
        return
    assert store.readable_path("runs/r/a.bin", size=3) == f"{store.root}/runs/r/a.bin"
    with pytest.raises(StoreFileRefused, match="has 3 bytes; its manifest records 4"):
        store.readable_path("runs/r/a.bin", size=4)
    assert store.writable_path("runs/r/new/b.bin") == f"{store.root}/runs/r/new/b.bin"
    assert store.local_folder(f"{store.root}/runs/r/tb") == f"{store.root}/runs/r/tb"
    assert store.exists("runs/r/tb") and store.exists("runs/r/new")


def test_pickled_store_keeps_its_backend_and_reached(store):
    store.write_bytes("a.bin", b"1")  # an answer: the store is reached
    again = pickle.loads(pickle.dumps(store))
    assert type(again.backend) is type(store.backend) and again.reached is store.reached
    assert again.read_bytes("a.bin") == b"1"
