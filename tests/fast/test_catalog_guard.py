"""User SQL may only read: the parser guard, and the locked connection behind it."""

from __future__ import annotations

import hashlib

import duckdb
import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.catalog.guard import check_read_only
from alignflow.errors import ConfigError, SqlRefused
from tests.fast.test_catalog_data import populate

REFUSED = {
    "copy_to": "COPY (SELECT * FROM rollouts) TO 'out.csv'",
    "copy_into_store": "COPY rollouts TO 'runs/r1/rollouts/iter=0/x.parquet' (FORMAT parquet)",
    "attach": "ATTACH 'other.duckdb' AS other",
    "detach": "DETACH memory",
    "install": "INSTALL httpfs",
    "load": "LOAD httpfs",
    "create_table": "CREATE TABLE t AS SELECT 1",
    "create_view": "CREATE OR REPLACE VIEW rollouts AS SELECT 1",
    "insert": "INSERT INTO _af_runs (run_id) VALUES ('x')",
    "update": "UPDATE _af_runs SET status = 'x'",
    "delete": "DELETE FROM _af_tasks",
    "drop": "DROP VIEW runs",
    "alter": "ALTER VIEW runs RENAME TO r",
    "pragma": "PRAGMA enable_profiling",
    "set": "SET enable_external_access = true",
    "reset": "RESET lock_configuration",
    "use": "USE memory",
    "export": "EXPORT DATABASE 'dump'",
    "call": "CALL pragma_version()",
    "checkpoint": "CHECKPOINT",
    "hidden_after_select": "SELECT 1; DROP VIEW runs",
    "hidden_after_comment": "SELECT 1 /* ; */; -- harmless?\nCOPY runs TO 'x.csv'",
    "explain_analyze": "EXPLAIN ANALYZE COPY (SELECT 1) TO 'x.csv'",
    "explain_analyze_insert": "EXPLAIN ANALYZE INSERT INTO _af_runs (run_id) VALUES ('x')",
    "cte_insert": "WITH x AS (INSERT INTO _af_runs (run_id) VALUES ('x') RETURNING *) "
                  "SELECT * FROM x",
    "cte_delete": "WITH x AS (DELETE FROM _af_tasks RETURNING *) FROM x",
    "cte_update": "WITH x AS (UPDATE _af_runs SET status = 'x' RETURNING *) FROM x",
    "cte_copy": "WITH x AS (COPY (SELECT 1) TO 'x.csv') SELECT 1",
    "cte_copy_return_files": "WITH x AS (COPY (SELECT 1) TO 'x.csv' (RETURN_FILES true)) FROM x",
    "subquery_cte_delete": "SELECT * FROM (WITH x AS (DELETE FROM _af_tasks RETURNING *) FROM x)",
    "scalar_cte_delete": "SELECT (WITH x AS (DELETE FROM _af_tasks RETURNING *) "
                         "SELECT count(*) FROM x) AS n",
    "query_function": "SELECT * FROM query('SELECT 1')",
    "pivot_cte_delete": "PIVOT (WITH x AS (DELETE FROM _af_tasks RETURNING *) FROM x) "
                        "ON task USING count(*)",
}

ALLOWED = {
    "select": "SELECT 1",
    "with": "WITH a AS (SELECT 1 AS x) SELECT x FROM a",
    "from_first": "FROM runs",
    "values": "VALUES (1, 2)",
    "describe": "DESCRIBE rollouts",
    "show": "SHOW TABLES",
    "summarize": "SUMMARIZE rollouts",
    "pivot": "PIVOT rollouts ON run_id USING avg(reward)",
    "explain": "EXPLAIN SELECT * FROM rollouts",
    "explain_analyze_select": "EXPLAIN ANALYZE SELECT count(*) FROM rollouts",
    "words_in_strings": "SELECT 'insert into x; drop table y' AS s, 1 AS \"update\"",
    "two_reads": "SELECT 1; SELECT 2",
    "alias_update": "SELECT 1 AS update",
    "alias_update_set": "SELECT 1 AS update, 2 AS set",
    "alias_delete_from": "SELECT 1 AS delete FROM range(3)",
    "alias_insert_into": "SELECT insert FROM (SELECT 1 AS insert) t",
    "alias_copy": "SELECT 1 AS copy",
    "query_table": "SELECT count(*) FROM query_table('runs')",
}


@pytest.mark.parametrize("query", REFUSED.values(), ids=REFUSED.keys())
def test_guard_refuses(query):
    with pytest.raises(SqlRefused, match=r"^SQL refused: ") as info:
        check_read_only(query)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name", ALLOWED)
def test_guard_allows_and_reads_run(name, catalog):
    assert len(check_read_only(ALLOWED[name])) == (2 if name == "two_reads" else 1)
    assert catalog.sql(ALLOWED[name]).num_rows >= 1


def test_refusal_names_the_statement():
    with pytest.raises(SqlRefused, match=r"DROP statement `DROP VIEW runs`"):
        check_read_only("SELECT 1; DROP VIEW runs")
    with pytest.raises(SqlRefused, match=r"INSTALL statement `INSTALL httpfs`"):
        check_read_only("INSTALL httpfs")


def test_empty_and_bad_sql_are_config_errors():
    with pytest.raises(ConfigError, match="empty SQL"):
        check_read_only("  -- nothing\n")
    with pytest.raises(ConfigError, match=r"bad SQL `SELECT \* FROM WHERE`"):
        check_read_only("SELECT * FROM WHERE")


def _digest(store) -> dict[str, str]:
    return {rel: hashlib.sha256(store.read_bytes(rel)).hexdigest() for rel in store.list("")}


@pytest.fixture
def catalog(local_store):
    populate(local_store)
    with Catalog(local_store) as cat:
        yield cat


def test_user_sql_never_modifies_the_store(local_store, catalog, tmp_path, monkeypatch):
    monkeypatch.chdir(local_store.path("."))
    before = _digest(local_store)
    for query in REFUSED.values():
        with pytest.raises(SqlRefused):
            catalog.sql(query)
    assert _digest(local_store) == before
    assert catalog.sql("SELECT count(*) AS n FROM rollouts").to_pylist() == [{"n": 12}]
    assert catalog.sql("SELECT count(*) AS n FROM _af_runs").to_pylist() == [{"n": 2}]


@pytest.mark.parametrize("what", ["read_text('/etc/hostname')", "glob('/tmp/*')",
                                  "read_parquet('{orphan}')"])
def test_reads_outside_committed_files_are_refused(local_store, what):
    info = populate(local_store)
    with Catalog(local_store) as cat, pytest.raises(SqlRefused, match="outside the store"):
        cat.sql("SELECT * FROM " + what.format(orphan=local_store.path(info["orphan"])))


def test_connection_is_locked_even_without_the_guard(local_store, catalog):
    """Bypass the parser guard: DuckDB itself refuses file writes, settings and extensions."""
    cur = catalog._raw_cursor()
    target = local_store.path("runs/r1/evil.csv")
    with pytest.raises(duckdb.PermissionException):
        cur.execute(f"COPY (SELECT 1) TO '{target}'")
    with pytest.raises(duckdb.InvalidInputException, match="locked"):
        cur.execute("SET enable_external_access = true")
    with pytest.raises(duckdb.InvalidInputException, match="locked"):
        cur.execute("SET lock_configuration = false")
    with pytest.raises(duckdb.Error):
        cur.execute("INSTALL httpfs")
    with pytest.raises(duckdb.PermissionException):
        cur.execute("SELECT * FROM read_text('/etc/hostname')")
    assert not local_store.exists("runs/r1/evil.csv")


def _committed_rollout_file(catalog) -> str:
    rel = next(r for r in catalog._built.files_by_name.values() if "/rollouts/" in r)
    return catalog.store.path(rel)


@pytest.mark.parametrize("fmt", ["parquet", "csv"])
def test_copy_in_a_cte_cannot_overwrite_a_committed_file(local_store, catalog, fmt):
    """DuckDB's allowed_paths let a COPY write onto a committed file; the guard refuses it."""
    before = _digest(local_store)
    target = _committed_rollout_file(catalog)
    query = (f"WITH x AS (COPY (SELECT 1 AS a) TO '{target}' (FORMAT {fmt}, "
             "USE_TMP_FILE false)) SELECT 1 AS ok")
    with pytest.raises(SqlRefused, match="contains COPY, which writes"):
        catalog.sql(query)
    with pytest.raises(SqlRefused, match="contains COPY, which writes"):
        catalog.cursor().execute(query)
    assert _digest(local_store) == before


def test_cursor_has_the_same_guard(local_store, catalog):
    cur = catalog.cursor()
    assert cur is catalog.cursor()  # one per thread
    assert cur.execute("SELECT count(*) AS n FROM rollouts WHERE reward > ?", [2.5]).fetchall() \
        == [(9,)]
    assert cur.description[0][0] == "n"
    assert cur.execute("SELECT 1 AS a UNION ALL SELECT 2").fetchone() == (1,)
    assert cur.fetchall() == [(2,)] and cur.fetchone() is None
    for query in ("DROP VIEW runs", "CREATE TABLE t AS SELECT 1",
                  "INSERT INTO _af_runs (run_id) VALUES ('x')"):
        with pytest.raises(SqlRefused):
            cur.execute(query)
    assert not hasattr(cur, "register") and not hasattr(cur, "sql")  # no raw DuckDB API
    assert catalog.sql("SELECT count(*) AS n FROM runs").to_pylist() == [{"n": 2}]


def test_huge_query_is_refused_before_parsing(monkeypatch):
    def parse(*_a, **_k):
        raise AssertionError("the text reached the parser")

    monkeypatch.setattr(duckdb, "extract_statements", parse)
    query = "SELECT '" + "x" * (20 * 2**20) + "'"
    with pytest.raises(SqlRefused, match=r"query text is 20,971,529 bytes; the limit is "
                                         r"1,000,000 bytes") as info:
        check_read_only(query)
    assert "\n" not in str(info.value)
    with pytest.raises(SqlRefused, match="limit is 10 bytes"):
        check_read_only("SELECT 12345678", max_bytes=10)
