"""`alignflow sql` (formats, errors, the shell through stdin) and `alignflow report`."""

from __future__ import annotations

import io
import json

import pyarrow.parquet as pq
import pytest

from alignflow.artifacts.commit import commit
from alignflow.cli import main
from tests.fast.test_catalog_data import populate

QUERY = "SELECT run_id, avg(reward) AS r FROM rollouts GROUP BY 1 ORDER BY 1"


@pytest.fixture
def url(local_store):
    populate(local_store)
    return local_store.url


def _sql(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["sql", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_format(capsys, url):
    code, out, _ = _sql(capsys, QUERY, "--store", url)
    assert code == 0
    assert out.splitlines()[4:6] == ["│ r1      │    2.5 │", "│ r2      │   12.5 │"]


def test_csv_format(capsys, url):
    code, out, _ = _sql(capsys, QUERY, "--store", url, "--format", "csv")
    assert code == 0
    assert out == '"run_id","r"\n"r1",2.5\n"r2",12.5\n'


def test_json_format_to_file(capsys, url, tmp_path):
    target = tmp_path / "out.json"
    code, out, _ = _sql(capsys, QUERY, "--store", url, "--format", "json", "--out", str(target))
    assert code == 0 and out == ""
    assert json.loads(target.read_text()) == [{"run_id": "r1", "r": 2.5},
                                              {"run_id": "r2", "r": 12.5}]


def test_parquet_format(capsys, url, tmp_path):
    target = tmp_path / "out.parquet"
    code, _, _ = _sql(capsys, QUERY, "--store", url, "--format", "parquet", "--out", str(target))
    assert code == 0
    assert pq.read_table(target).to_pylist() == [{"run_id": "r1", "r": 2.5},
                                                 {"run_id": "r2", "r": 12.5}]


def test_parquet_needs_out(capsys, url):
    code, out, err = _sql(capsys, QUERY, "--store", url, "--format", "parquet")
    assert (code, out) == (2, "")
    assert err == "error: --format parquet needs --out FILE (Parquet is binary)\n"


def test_query_from_stdin(capsys, url, monkeypatch):
    monkeypatch.setattr("sys.stdin", io.StringIO("SELECT count(*) AS n FROM tasks"))
    code, out, _ = _sql(capsys, "-", "--store", url, "--format", "csv")
    assert (code, out) == (0, '"n"\n8\n')


@pytest.mark.parametrize(("query", "expected"), [
    ("DROP VIEW runs", "error: SQL refused: DROP statement `DROP VIEW runs`; "),
    ("SELEC 1", "error: bad SQL `SELEC 1`: Parser Error: syntax error at or near \"SELEC\""),
    ("SELECT x FROM runs", "error: SQL error in `SELECT x FROM runs`: Binder Error: "),
])
def test_errors_are_one_line(capsys, url, query, expected):
    code, out, err = _sql(capsys, query, "--store", url)
    assert (code, out) == (2, "")
    assert err.startswith(expected) and err.count("\n") == 1 and "Traceback" not in err


def test_missing_store(capsys, tmp_path):
    code, out, err = _sql(capsys, "SELECT 1", "--store", str(tmp_path / "none"))
    assert (code, out) == (2, "")
    assert err == (f"error: no store at {tmp_path / 'none'}: the path does not exist; expected "
                   "a store written by alignflow (--store URL or $ALIGNFLOW_STORE)\n")


def test_corrupt_parquet_is_named_and_the_rest_served(capsys, local_store):
    populate(local_store)
    bad = "runs/r9/metrics/generate-bad.parquet"
    local_store.write_bytes(bad, b"not parquet at all")
    commit(local_store, "r9", "learn", {"artifacts": [{
        "table": "metrics", "path": bad, "rows": 1, "schema": "metrics",
        "schema_version": "1.0", "bytes": 18}]})
    code, out, err = _sql(capsys, "SELECT count(*) AS n FROM metrics", "--store",
                          local_store.url, "--format", "csv")
    assert (code, out) == (0, '"n"\n8\n')
    assert err.startswith(f"warning: corrupt or unreadable Parquet file {local_store.url}/{bad}: ")
    assert err.endswith("; left out\n") and err.count("\n") == 1


def test_shell_through_stdin(capsys, url, monkeypatch):
    script = "\n".join([
        ".tables",
        "SELECT count(*) AS n",
        "  FROM rollouts;",
        "SELECT * FROM nope;",
        "DROP VIEW runs;",
        ".schema metrics",
        ".format csv",
        "SELECT sum(reward) AS s FROM rollouts;",
        ".bogus",
        ".quit",
        "SELECT 'not reached';",
    ]) + "\n"
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    code, out, err = _sql(capsys, "--store", url)
    assert code == 2 and err == ""  # statements failed: the exit status says so
    lines = out.splitlines()
    assert lines[0] == ("campaign_inputs  campaign_rounds  campaigns  checkpoints  memory_peaks  "
                        "metrics  preferences  rollouts  rounds  runs  sft_samples  tasks")
    assert "│    12 │" in out
    assert ("error: SQL error in `SELECT * FROM nope`: Catalog Error: Table with name nope "
            "does not exist!") in lines
    assert any(line.startswith("error: SQL refused: DROP statement") for line in lines)
    assert "│ metrics │ step     │ BIGINT  │" in out
    assert '"s"' in lines and "90" in lines
    assert "error: unknown command '.bogus'; .help lists the commands" in lines
    assert "not reached" not in out


@pytest.mark.parametrize(("script", "code"), [
    ("SELECT 1;\nSELECT 2;\n", 0),
    ("SELECT 1;\nDROP VIEW runs;\nSELECT 3 AS third;\n", 2),
    ("SELECT nope FROM runs;\nSELECT 3 AS third;\n", 2),
    ("SELECT 1 AS update;\n", 0),
    ("SELECT 3 AS third;\nSELECT 'unterminated", 2),
])
def test_piped_statements_exit_status(capsys, url, monkeypatch, script, code):
    monkeypatch.setattr("sys.stdin", io.StringIO(script))
    got, out, _ = _sql(capsys, "--store", url, "--format", "csv")
    assert got == code
    assert ("third" in out) == ("third" in script)  # later statements still run


def test_out_is_never_inside_the_store(capsys, local_store, tmp_path):
    """The issue's case: --out onto a committed Parquet file replaced its rows."""
    populate(local_store)
    committed = local_store.path(local_store.list("runs/r1/rollouts", "*.parquet")[0])
    before = pq.read_table(committed)
    link = tmp_path / "link.parquet"
    link.symlink_to(committed)
    for target in (committed, str(link), local_store.path("runs/r1/new.csv"), local_store.root):
        for force in ([], ["--force"]):
            code, out, err = _sql(capsys, QUERY, "--store", local_store.url, "--format",
                                  "parquet", "--out", target, *force)
            assert (code, out) == (2, "")
            assert err == (f"error: --out {target}: inside the store {local_store.url}; the "
                           "store holds only what runs commit, write results outside it\n")
    assert pq.read_table(committed).equals(before)
    assert not local_store.exists("runs/r1/new.csv")


def test_out_needs_force_to_replace_a_file(capsys, url, tmp_path):
    target = tmp_path / "out.csv"
    target.write_text("keep me")
    code, _, err = _sql(capsys, QUERY, "--store", url, "--format", "csv", "--out", str(target))
    assert code == 2
    assert err == f"error: --out {target}: the file exists; pass --force to replace it\n"
    assert target.read_text() == "keep me"
    code, _, _ = _sql(capsys, QUERY, "--store", url, "--format", "csv", "--out", str(target),
                      "--force")
    assert code == 0 and target.read_text().startswith('"run_id","r"')
    assert (target.stat().st_mode & 0o777) == (0o666 & ~_umask())


def _umask() -> int:
    import os

    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_report(capsys, url, tmp_path):
    out = tmp_path / "r1.html"
    assert main(["report", "r1", "--store", url, "--out", str(out)]) == 0
    assert capsys.readouterr().out == f"wrote {out}\n"
    page = out.read_text()
    assert page.startswith("<!DOCTYPE html>") and "<title>r1 · alignflow report</title>" in page
    assert main(["report", "r1", "--store", url, "--out", str(out)]) == 2
    assert "the file exists; pass --force" in capsys.readouterr().err
    assert main(["report", "r1", "--store", url, "--out", str(out), "--force"]) == 0


def test_report_unknown_run(capsys, url, tmp_path):
    assert main(["report", "nope", "--store", url, "--out", str(tmp_path / "x.html")]) == 2
    assert capsys.readouterr().err.startswith("error: run 'nope' not found in store ")
    assert not (tmp_path / "x.html").exists()
