"""The driver is killed during a manifest commit, at every point of the local protocol
(and before/after the one conditional PUT on S3): after a plain `resume`, each task is
committed exactly once and every committed byte equals an uninterrupted run's."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from alignflow.artifacts import gc
from alignflow.artifacts.store import Store
from alignflow.catalog import Catalog
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests import flows_for_tests as F
from tests.faults.commit_killer import CFG

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCAL = [("before", 1), ("temp", 3), ("link", 2), ("linked", 1), ("dirsync", 3),
         ("after", 2)]
S3 = [("before", 2), ("after", 2)]


def committed_bytes(store: Store) -> dict[str, list[bytes]]:
    out = {}
    for key, m in runs.read_manifests(store, "k").items():
        out[key] = [store.read_bytes(a["path"]) for a in m["artifacts"]]
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    store = Store.open(str(tmp_path_factory.mktemp("ref") / "store"))
    api.run(F.blobs, CFG, store=store, run_id="k", seed=5, executor="inline")
    return committed_bytes(store)


def _killed_then_resumed(store: Store, point: str, nth: int, endpoint: str | None = None):
    args = [sys.executable, "-m", "tests.faults.commit_killer", store.url, point, str(nth)]
    proc = subprocess.run(args + ([endpoint] if endpoint else []), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -9, proc.stderr  # it did die at the point
    assert api.get_status("k", store=store) == runs.RESUMABLE  # its driver provably died
    api.resume("k", store=store)


def _exactly_once(store: Store, reference) -> None:
    keys = [f"iter-{i:04d}/blob" for i in range(CFG["iters"])]
    assert list(runs.read_manifests(store, "k")) == keys
    assert committed_bytes(store) == reference
    with Catalog(store) as cat:
        rows = cat.sql("SELECT task_key, count(*) AS n FROM metrics GROUP BY 1 ORDER BY 1")
    assert rows.to_pylist() == [{"task_key": k, "n": CFG["rows"]} for k in keys]


@pytest.mark.parametrize(("point", "nth"), LOCAL, ids=[f"{p}-{n}" for p, n in LOCAL])
def test_killed_in_a_local_commit(tmp_path, reference, point, nth):
    store = Store.open(str(tmp_path / "store"))
    _killed_then_resumed(store, point, nth)
    _exactly_once(store, reference)
    leftovers = gc.find_orphans(store)  # a temp of the cut commit, nothing a reader sees
    assert all(o.path.rsplit("/", 1)[-1].startswith(".") or "/metrics/" in o.path
               for o in leftovers), leftovers


@pytest.mark.parametrize(("point", "nth"), S3, ids=[f"{p}-{n}" for p, n in S3])
def test_killed_in_an_s3_commit(s3_server, s3_bucket, reference, point, nth):
    store = Store.open(f"s3://{s3_bucket}/k", storage_options={"endpoint_url": s3_server})
    _killed_then_resumed(store, point, nth, s3_server)
    _exactly_once(store, reference)
