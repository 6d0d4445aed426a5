"""The catalog's local index (catalog/index.py): a second opening reads no unchanged manifest
and checks no unchanged footer again; a changed, added or removed file is seen; an index
that is garbage, hostile or for another store is ignored. And `alignflow sql QUERY` builds
only the views the query names (issue 46, "SQL that opens in a blink")."""

from __future__ import annotations

import json
import os
import time

import pytest

from alignflow.artifacts.commit import commit
from alignflow.artifacts.parquet_io import write_table
from alignflow.catalog import index, verify
from alignflow.catalog.catalog import Catalog
from alignflow.catalog.guard import tables_named
from tests.fast.test_catalog_data import _rollouts, populate

COUNT = "SELECT run_id, count(*) AS n FROM rollouts GROUP BY 1 ORDER BY 1"


@pytest.fixture
def store(local_store, tmp_path, monkeypatch):
    monkeypatch.setenv("ALIGNFLOW_CATALOG_CACHE", str(tmp_path / "cache"))
    populate(local_store)
    return local_store


@pytest.fixture
def reads(store, monkeypatch):
    """Store files read by a scan, and footer checks made, from here on."""
    seen: dict[str, list] = {"json": [], "footers": []}
    real_read, real_footers = store.read_many, verify._footers

    def read_many(rels):
        rels = list(rels)
        seen["json"] += rels
        return real_read(rels)

    def footers(store_, con, rels, problems, say):
        seen["footers"] += rels
        return real_footers(store_, con, rels, problems, say)

    monkeypatch.setattr(store, "read_many", read_many)
    monkeypatch.setattr(verify, "_footers", footers)
    return seen


def _rows(store) -> list:
    with Catalog(store) as cat:
        return cat.sql(COUNT).to_pylist()


def _index_file(store) -> str:
    return index.load(store.url).path


def test_a_second_opening_reads_nothing_unchanged(store, reads):
    first = _rows(store)
    assert reads["json"] and reads["footers"]
    reads["json"].clear(), reads["footers"].clear()
    assert _rows(store) == first == [{"run_id": "r1", "n": 6}, {"run_id": "r2", "n": 6}]
    assert reads == {"json": [], "footers": []}


def test_a_changed_data_file_is_checked_again(store, reads):
    _rows(store)
    with Catalog(store) as cat:
        rel = cat.sql("SELECT manifest FROM tasks WHERE run_id = 'r1' AND task = 'generate' "
                      "ORDER BY 1 LIMIT 1").to_pylist()[0]["manifest"]
    path = json.loads(store.read_bytes(rel))["artifacts"][0]["path"]
    two = {k: v[:2] for k, v in _rollouts("r1", 0).items()}  # 2 rows; the manifest says 3
    other = write_table(store, "rollouts", two, run_id="r1", task="generate",
                        partition={"iter": 0})
    os.replace(store.path(other.path), store.path(path))  # same name, other bytes
    with Catalog(store) as cat:
        assert cat.sql(COUNT).to_pylist() == [{"run_id": "r1", "n": 3}, {"run_id": "r2", "n": 6}]
        assert any(p.path == path and "differs from its manifest" in p.message
                   for p in cat.problems)


def test_an_added_or_removed_task_is_seen(store):
    _rows(store)
    ref = write_table(store, "rollouts", _rollouts("r2", 1), run_id="r2", task="generate",
                      partition={"iter": 5})
    commit(store, "r2", "iter-0005/generate", {"artifacts": [ref]})
    assert _rows(store) == [{"run_id": "r1", "n": 6}, {"run_id": "r2", "n": 9}]
    store.delete("runs/r1", recursive=True)
    assert _rows(store) == [{"run_id": "r2", "n": 9}]
    with open(_index_file(store)) as f:
        assert not [rel for rel in json.load(f)["entries"] if rel.startswith("runs/r1/")]


def test_a_rewritten_manifest_is_read_again(store):
    _rows(store)
    rel = "runs/r2/tasks/iter-0001/learn.json"
    manifest = json.loads(store.read_bytes(rel))
    time.sleep(0.01)
    store.write_bytes(rel, json.dumps({**manifest, "attempts": 7}).encode())
    with Catalog(store) as cat:
        got = cat.sql("SELECT attempts FROM tasks WHERE manifest = ?", [rel]).to_pylist()
    assert got == [{"attempts": 7}]


@pytest.mark.parametrize("content", [b"\x00garbage", b"[]", b"{" * 100_000,
                                     b'{"format": 1, "store": "elsewhere", "entries": {}}',
                                     b'{"format": 1, "store": null, "entries": []}'])
def test_an_unusable_index_is_ignored(store, content):
    first = _rows(store)
    with open(_index_file(store), "wb") as f:
        f.write(content)
    assert _rows(store) == first


def _doctor(store, change) -> None:
    """Open once (the index is written), then rewrite each of its entries with `change`."""
    _rows(store)
    path = _index_file(store)
    with open(path) as f:
        doc = json.load(f)
    for rel, entry in doc["entries"].items():
        change(rel, entry)
    with open(path, "w") as f:
        json.dump(doc, f)


def test_hostile_entries_are_validated_like_the_store(store):
    def hostile(rel, entry):
        facts = entry[1]
        if "json" in facts and "artifacts" in facts["json"]:  # a manifest: point outside
            for art in facts["json"]["artifacts"]:
                art["path"] = "../../../etc/passwd.parquet"
        if "footer" in facts:
            facts["footer"] = ["many", {"x": 1}, 3]  # wrong types: checked again
        if "columns" in facts:
            facts["columns"] = "everything"

    _doctor(store, hostile)
    with Catalog(store) as cat:
        assert cat.sql(COUNT).num_rows == 0
        assert any("leaves the store" in p.message for p in cat.problems)


def test_entries_keyed_to_other_sizes_or_too_deep_are_ignored(store):
    first = _rows(store)

    def stale(rel, entry):
        entry[0][0] += 1  # another size: not this file
        if "json" in entry[1]:
            entry[1]["json"] = {"artifacts": []}

    _doctor(store, stale)
    assert _rows(store) == first

    def deep(rel, entry):
        if "json" in entry[1]:
            nested: dict = {}
            for _ in range(200):
                nested = {"a": nested}
            entry[1]["json"] = {**entry[1]["json"], "output": nested}

    _doctor(store, deep)
    with Catalog(store) as cat:
        assert cat.sql(COUNT).to_pylist() == first
        assert not cat.problems


def test_a_link_as_the_index_is_not_followed(store, tmp_path):
    first = _rows(store)
    path = _index_file(store)
    os.replace(path, tmp_path / "real.json")
    os.symlink(tmp_path / "real.json", path)
    assert _rows(store) == first


def test_only_the_views_a_query_names_are_built(store):
    with Catalog(store, for_query="SELECT count(*) FROM tasks") as cat:
        assert cat.tables() == ["tasks"]
    with Catalog(store, for_query=COUNT) as cat:
        assert "rollouts" in cat.tables() and "tasks" not in cat.tables()
        assert cat.sql(COUNT).num_rows == 2
    for query in ("SELECT * FROM runs", "SELECT 1", "SELECT * FROM nowhere", "SHOW TABLES"):
        with Catalog(store, for_query=query) as cat:
            assert {"runs", "tasks", "rollouts", "metrics", "campaigns"} <= set(cat.tables())


def test_table_names_come_from_duckdbs_parser():
    assert tables_named("SELECT * FROM Rollouts r JOIN main.tasks t USING (run_id) "
                        "WHERE 'FROM runs' <> '' -- FROM metrics") == {"rollouts", "tasks"}
    assert tables_named("SELECT * FROM read_parquet('/etc/passwd')") is None  # never read
    assert tables_named("not sql at all") is None
    assert tables_named("WITH a AS (SELECT 1) SELECT * FROM a, metrics JOIN runs USING (run_id)"
                        ) == {"metrics", "runs"}
    assert tables_named("SELECT * FROM query('SELECT * FROM runs') JOIN tasks USING (x)") is None
