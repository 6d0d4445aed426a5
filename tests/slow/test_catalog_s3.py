"""The catalog over a real S3 HTTP endpoint (moto server), through s3fs registered with
DuckDB: no httpfs extension is involved."""

from __future__ import annotations

import pytest

from alignflow.artifacts.commit import commit
from alignflow.catalog.catalog import Catalog
from alignflow.cli import main
from alignflow.errors import SqlRefused
from tests.fast.test_catalog_data import populate

pytestmark = pytest.mark.slow


@pytest.fixture
def s3_catalog(s3_store):
    info = populate(s3_store)
    with Catalog(s3_store) as cat:
        yield cat, info


def test_s3_views_show_committed_rows_only(s3_catalog):
    cat, _ = s3_catalog
    got = cat.sql("SELECT run_id, iteration, avg(reward) AS r, count(*) AS n FROM rollouts "
                  "GROUP BY ALL ORDER BY ALL").to_pylist()
    assert got == [{"run_id": "r1", "iteration": 0, "r": 2.0, "n": 3},
                   {"run_id": "r1", "iteration": 1, "r": 3.0, "n": 3},
                   {"run_id": "r2", "iteration": 0, "r": 12.0, "n": 3},
                   {"run_id": "r2", "iteration": 1, "r": 13.0, "n": 3}]
    assert cat.sql("SELECT count(*) AS n FROM tasks").to_pylist() == [{"n": 8}]
    assert cat.sql("SELECT sum(value) AS s FROM metrics WHERE key = 'train/policy_loss'"
                   ).to_pylist() == [
        {"s": 3.0}]


def test_s3_orphan_and_other_keys_are_unreadable(s3_store, s3_catalog):
    cat, info = s3_catalog
    orphan = s3_store.fs.unstrip_protocol(s3_store.path(info["orphan"]))
    with pytest.raises(SqlRefused, match="outside the store"):
        cat.sql(f"SELECT * FROM read_parquet('{orphan}')")
    with pytest.raises(SqlRefused, match="COPY statement"):
        cat.sql(f"COPY (SELECT 1) TO '{orphan}'")
    assert s3_store.exists(info["orphan"])


def test_s3_corrupt_files_are_named_and_the_rest_served(s3_store):
    populate(s3_store)
    bad = "runs/r5/rollouts/iter=0/generate-bad.parquet"
    s3_store.write_bytes(bad, b"garbage")
    commit(s3_store, "r5", "iter-0000/generate", {"artifacts": [{
        "table": "rollouts", "path": bad, "rows": 1, "schema": "rollouts",
        "schema_version": "1.0", "bytes": 7}]})
    s3_store.write_bytes("runs/r2/run.json", b"{")
    with Catalog(s3_store) as cat:
        assert cat.sql("SELECT count(*) AS n FROM rollouts").to_pylist() == [{"n": 12}]
        problems = {p.path: p.message for p in cat.problems}
        assert problems[bad].startswith(f"corrupt or unreadable Parquet file {s3_store.url}/{bad}")
        assert problems["runs/r2/run.json"].startswith(f"{s3_store.url}/runs/r2/run.json is not "
                                                       "valid JSON")
        marked = cat.sql("SELECT run_id FROM runs WHERE problem IS NOT NULL ORDER BY 1")
        assert marked.column("run_id").to_pylist() == ["r2", "r5"]


def test_s3_cli_csv(s3_store, capsys, monkeypatch):
    populate(s3_store)
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_store.storage_options["endpoint_url"])
    code = main(["sql", "SELECT count(*) AS n FROM rollouts", "--store", s3_store.url,
                 "--format", "csv"])
    assert (code, capsys.readouterr().out) == (0, '"n"\n12\n')
