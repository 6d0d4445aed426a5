"""The read-only guard parsing on a catalog's own connection (`guard.parsing_on`, issue 46:
one DuckDB database per `alignflow sql`, not two) binds nothing there — that connection is
not locked while the guard names the views to build, and binding a table function opens its
file — and answers as it does on its private, data-less connection."""

from __future__ import annotations

import duckdb
import pytest

from alignflow.catalog import guard
from alignflow.errors import SqlRefused

NAMED = ["SELECT * FROM Rollouts r JOIN main.tasks t USING (run_id) "
         "WHERE 'FROM runs' <> '' -- FROM metrics",
         "WITH a AS (SELECT 1) SELECT * FROM a, metrics JOIN runs USING (run_id)",
         "SELECT count(*) AS n FROM tasks",
         "SELECT * FROM query('SELECT * FROM runs') JOIN tasks USING (x)"]
REFUSED = ["WITH x AS (INSERT INTO t VALUES (1) RETURNING *) SELECT * FROM x",
           "COPY (SELECT 1) TO '/tmp/out.csv'",
           "SELECT 1; DROP VIEW runs",
           "EXPLAIN ANALYZE DELETE FROM runs"]


@pytest.fixture
def nothing_binds(monkeypatch):
    def bind(*args, **kwargs):
        raise AssertionError("the guard bound a query on a catalog's connection")

    monkeypatch.setattr(guard.duckdb, "get_table_names", bind)


@pytest.fixture
def private():
    """The names the private connection gives (before `get_table_names` is replaced)."""
    return [guard.tables_named(q) for q in NAMED]


def test_the_views_named_are_the_same_and_nothing_is_bound(private, nothing_binds):
    con = duckdb.connect(":memory:")  # external access on, as a catalog's before its lock
    with guard.parsing_on(con):
        assert [guard.tables_named(q) for q in NAMED] == private
        # a table function's file is never opened: no table named, so every view is built
        assert not guard.tables_named("SELECT * FROM read_parquet('/etc/passwd')")
    con.close()


def test_writes_are_refused_alike(nothing_binds):
    guard._checked.cache_clear()  # parsed again, on the connection given
    con = duckdb.connect(":memory:")
    with guard.parsing_on(con.cursor()):
        for query in REFUSED:
            with pytest.raises(SqlRefused):
                guard.check_read_only(query)
        assert guard.check_read_only("SELECT 1; FROM runs") == ["SELECT 1", "FROM runs"]
    con.close()


def test_the_private_connection_is_used_again_after_the_block():
    con = duckdb.connect(":memory:")
    with guard.parsing_on(con):
        pass
    con.close()  # a closed catalog connection is never parsed on afterwards
    assert guard.tables_named("SELECT * FROM runs") == {"runs"}
