"""Catalog SQL runs under limits: time, memory, threads, a private spill folder."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time

import duckdb
import pyarrow.parquet as pq
import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.catalog.limits import SqlLimits, parse_memory, total_memory
from alignflow.catalog.spill import remove_orphans
from alignflow.cli import main
from alignflow.errors import ConfigError, QueryLimit, SqlRefused
from tests.fast.test_catalog_data import populate

ENDLESS = "SELECT count(*) AS n FROM range(100000000000) a"
GREEDY = "SELECT string_agg(range::VARCHAR, ',') AS s FROM range(50000000)"


@pytest.fixture
def store(local_store):
    populate(local_store)
    return local_store


def test_a_query_past_its_time_limit_is_stopped(store):
    with Catalog(store, limits=SqlLimits(timeout_s=0.5)) as cat:
        start = time.monotonic()
        with pytest.raises(QueryLimit, match=r"^SQL stopped: `SELECT count\(\*\) AS n FROM "
                                             r"range\(100000000000\) a` ran past the 0.5 s time "
                                             r"limit \(--timeout SECONDS") as info:
            cat.sql(ENDLESS)
        assert time.monotonic() - start < 10
        assert "\n" not in str(info.value)
        assert cat.sql("SELECT count(*) AS n FROM rollouts").to_pylist() == [{"n": 12}]


def test_a_query_past_its_memory_limit_is_stopped(store):
    with Catalog(store, limits=SqlLimits(memory="64MiB")) as cat:
        with pytest.raises(QueryLimit, match=r"needs more than the 64 MiB memory limit "
                                             r"\(--memory-limit"):
            cat.sql(GREEDY)
        assert cat.sql("SELECT count(*) AS n FROM runs").to_pylist() == [{"n": 2}]


def test_threads_memory_and_spill_folder_are_ours(store, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with Catalog(store, limits=SqlLimits(threads=1, memory="256MiB")) as cat:
        row = cat.sql("SELECT current_setting('threads') AS t, current_setting('memory_limit') "
                      "AS m, current_setting('temp_directory') AS d").to_pylist()[0]
        assert row == {"t": 1, "m": "256.0 MiB", "d": cat.temp_dir}
        assert stat.S_IMODE(os.stat(cat.temp_dir).st_mode) == 0o700
        assert not cat.temp_dir.startswith(str(tmp_path))
        with pytest.raises(SqlRefused, match="SET statement"):
            cat.cursor().execute("SET threads = 8")
    assert not os.path.exists(cat.temp_dir)  # removed on close


def test_settings_cannot_be_changed_on_the_raw_connection(store):
    with Catalog(store, limits=SqlLimits(threads=1)) as cat, pytest.raises(
            duckdb.InvalidInputException, match="locked"):
        cat._raw_cursor().execute("SET memory_limit = '100GB'")


def test_duckdb_default_temp_folder_is_not_readable(store, tmp_path, monkeypatch):
    """DuckDB may always read its temp folder; ./.tmp must not be it."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / ".tmp").mkdir()
    (tmp_path / ".tmp" / "secret.txt").write_text("not for SQL")
    with Catalog(store) as cat, pytest.raises(SqlRefused, match="outside the store"):
        cat.sql("SELECT content FROM read_text('.tmp/secret.txt')")


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"timeout_s": 0}, r"--timeout 0: expected seconds > 0"),
    ({"timeout_s": float("nan")}, r"--timeout nan"),
    ({"threads": 0}, r"--threads 0: expected an integer from 1 to \d+ \(this machine's usable "
                     r"cores\)"),
    ({"memory": "lots"}, r"--memory-limit 'lots': expected a size such as 4GB"),
    ({"memory": "150%"}, r"--memory-limit '150%': expected at least 1MiB and at most 100%"),
    ({"max_query_bytes": 0}, r"max_query_bytes 0"),
])
def test_bad_limits_name_the_flag(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SqlLimits(**kwargs)


def test_memory_sizes():
    assert parse_memory("4GB") == 4 * 10**9
    assert parse_memory("512 MiB") == 512 * 2**20
    assert parse_memory("50%") == total_memory() // 2
    assert SqlLimits().memory_bytes == total_memory() // 4  # the default: a quarter of the RAM


def test_cli_timeout_is_one_line(capsys, store):
    code = main(["sql", ENDLESS, "--store", store.url, "--timeout", "0.3", "--threads", "1"])
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err.startswith("error: SQL stopped: ") and err.count("\n") == 1
    assert main(["sql", "SELECT 1", "--store", store.url, "--memory-limit", "x"]) == 2
    assert "--memory-limit 'x'" in capsys.readouterr().err


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"timeout_s": 1e308}, r"--timeout 1e\+308: expected seconds > 0 and at most 86400 \(a day\)"),
    ({"threads": 100_000}, r"--threads 100000: expected an integer from 1 to \d+ \(this "
                           r"machine's usable cores\)"),
    ({"memory": "1000000TB"}, r"--memory-limit '1000000TB': more than this machine's [\d.]+ "
                              r"GiB of RAM; expected at most 100%"),
    ({"max_rows": 0}, r"--max-rows 0: expected an integer >= 1"),
    ({"max_bytes": "50%"}, r"--max-bytes '50%': expected a size such as 4GB, 512MiB$"),
])
def test_limits_past_the_machine_are_refused(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        SqlLimits(**kwargs)


def test_cli_refuses_limits_past_the_machine_in_one_line(capsys, store):
    for flag, value in (("--timeout", "1e308"), ("--threads", "100000"),
                        ("--memory-limit", "1000000TB")):
        start = time.monotonic()
        code = main(["sql", ENDLESS, "--store", store.url, flag, value])
        out, err = capsys.readouterr()
        assert (code, out) == (2, "") and time.monotonic() - start < 10
        assert err.startswith(f"error: {flag} ") and err.count("\n") == 1


def test_a_day_long_deadline_leaves_the_watchdog_alive(store):
    with Catalog(store, limits=SqlLimits(timeout_s=86_400)) as cat:
        assert cat.sql("SELECT 1 AS x").to_pylist() == [{"x": 1}]
    with Catalog(store, limits=SqlLimits(timeout_s=0.5)) as cat, pytest.raises(QueryLimit):
        cat.sql(ENDLESS)


def test_results_past_the_row_or_byte_cap_are_stopped(store):
    with Catalog(store, limits=SqlLimits(max_rows=100_000)) as cat:
        assert cat.sql("SELECT * FROM range(100000)").num_rows == 100_000
        with pytest.raises(QueryLimit, match=r"^SQL stopped: `SELECT \* FROM range\(100001\)` "
                                             r"returns more than 100,000 rows \(--max-rows N"):
            cat.sql("SELECT * FROM range(100001)")
    with Catalog(store, limits=SqlLimits(max_bytes="1MiB")) as cat, pytest.raises(
            QueryLimit, match=r"returns more than 1 MiB \(--max-bytes SIZE"):
        cat.sql("SELECT repeat('x', 1000) AS s FROM range(2000)")


def test_results_stream_in_batches(store):
    with Catalog(store) as cat, cat.stream("SELECT range AS i FROM range(200000)") as rows:
        sizes = [batch.num_rows for batch in rows]
    assert sum(sizes) == 200_000 and len(sizes) >= 3


@pytest.mark.parametrize("fmt", ["csv", "json", "parquet"])
def test_cli_caps_leave_no_partial_file(capsys, store, tmp_path, fmt):
    (tmp_path / "results").mkdir()
    out = tmp_path / "results" / f"result.{fmt}"
    argv = ["sql", "SELECT range AS i FROM range(300000)", "--store", store.url, "--format",
            fmt, "--out", str(out)]
    assert main([*argv, "--max-rows", "200000"]) == 2
    assert "returns more than 200,000 rows" in capsys.readouterr().err
    assert os.listdir(tmp_path / "results") == []
    assert main([*argv, "--max-rows", "300000"]) == 0
    if fmt == "parquet":
        assert pq.read_table(out).column("i").to_pylist() == list(range(300_000))
    elif fmt == "csv":
        assert out.read_text().splitlines()[-1] == "299999"
    else:
        assert json.loads(out.read_text())[-1] == {"i": 299_999}


def test_spill_folders_of_dead_processes_are_removed(tmp_path):
    dead = subprocess.Popen(["true"])
    dead.wait()
    gone = tmp_path / f"alignflow-sql-{dead.pid}-abc"
    alive = tmp_path / f"alignflow-sql-{os.getpid()}-abc"
    for folder in (gone, alive):
        folder.mkdir()
        (folder / "duckdb_temp_block-1.block").write_bytes(b"x")
    assert remove_orphans(str(tmp_path)) == [str(gone)]
    assert not gone.exists() and alive.exists()
