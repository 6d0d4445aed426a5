"""The catalog reads a hostile store without hanging or reading without end, and serves no
file that disagrees with its manifest (issue 20 §4, §5): each bad file is named in one
line and its run marked; every other row is served. `--out` never writes into a store."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.cli import main
from tests.fast.test_catalog_data import populate

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def store(local_store):
    populate(local_store)
    return local_store


def _zero(store) -> str:
    os.unlink(store.path("runs/r2/run.json"))
    os.symlink("/dev/zero", store.path("runs/r2/run.json"))
    return "runs/r2/run.json is a symbolic link"


def _fifo(store) -> str:
    os.mkfifo(store.path("runs/r2/tasks/fifo.json"))
    return "runs/r2/tasks/fifo.json is a FIFO"


def _deep(store) -> str:
    store.write_bytes("runs/r2/tasks/iter-0000/generate.json", b"[" * 100_000)
    return "runs/r2/tasks/iter-0000/generate.json nests JSON more than 128 levels deep"


def _huge(store) -> str:
    os.truncate(store.path("runs/r2/run.json"), 2**40)  # a sparse TiB
    return "runs/r2/run.json is 1 TiB; a file of this kind is at most 4 MiB (not read)"


def _linked_tasks(store) -> str:
    os.rename(store.path("runs/r2/tasks"), store.path("elsewhere"))
    os.symlink(store.path("elsewhere"), store.path("runs/r2/tasks"))
    return "runs/r2/tasks is a symbolic link"


HOSTILE = {"zero": _zero, "fifo": _fifo, "deep": _deep, "huge": _huge,
           "linked": _linked_tasks}


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_a_hostile_file_is_named_and_the_rest_served(store, hostile, capsys, bounded_memory):
    says = HOSTILE[hostile](store)
    with Catalog(store) as cat:
        [problem] = [p for p in cat.problems if says in p.message]
        assert problem.run_id == "r2" and "\n" not in problem.message
        marked = {r["run_id"]: r["problem"]
                  for r in cat.sql("SELECT run_id, problem FROM runs").to_pylist()}
        assert marked["r1"] is None and says in marked["r2"]
        got = cat.sql("SELECT run_id, count(*) AS n FROM rollouts GROUP BY 1 ORDER BY 1")
        assert {"run_id": "r1", "n": 6} in got.to_pylist()
    code = main(["sql", "SELECT count(*) AS n FROM runs", "--store", store.url,
                 "--format", "csv"])
    out, err = capsys.readouterr()
    assert (code, out) == (0, '"n"\n2\n')
    assert says in err and all(line.startswith("warning: ") for line in err.splitlines())


def _overwrite(store, rel: str, table: pa.Table) -> None:
    pq.write_table(table, store.path(rel))


def _victim(store) -> str:
    """r1's committed rollouts of iteration 0 (not the orphan beside it)."""
    return store.read_json("runs/r1/tasks/iter-0000/generate.json")["artifacts"][0]["path"]


@pytest.mark.parametrize("tamper", ["more rows", "same rows, other values", "foreign schema"])
def test_a_tampered_committed_parquet_file_is_left_out(store, tamper):
    victim = _victim(store)
    rows = pq.read_table(store.path(victim))
    if tamper == "more rows":
        table = pa.concat_tables([rows, rows])
    elif tamper == "same rows, other values":
        table = rows.set_column(rows.schema.get_field_index("reward"), "reward",
                                pa.array([100.0] * 3))
        table = table.replace_schema_metadata(rows.schema.metadata)
    else:
        table = pa.table({"run_id": ["r1"] * 3, "reward": [100.0] * 3})
    _overwrite(store, victim, table)
    with Catalog(store) as cat:
        message = {p.path: p.message for p in cat.problems}[victim]
        assert message.startswith(f"committed Parquet file {store.url}/{victim} differs from "
                                  "its manifest: ")
        assert message.endswith("; changed after its commit, left out")
        got = cat.sql("SELECT run_id, count(*) AS n, max(reward) AS top FROM rollouts "
                      "GROUP BY 1 ORDER BY 1").to_pylist()
        assert got == [{"run_id": "r1", "n": 3, "top": 4.0}, {"run_id": "r2", "n": 6,
                                                              "top": 14.0}]
        [r1] = cat.sql("SELECT problem FROM runs WHERE run_id = 'r1'").to_pylist()
        assert r1["problem"] == message


def test_out_never_writes_into_another_store(store, tmp_path, capsys):
    import shutil

    other = tmp_path / "other"
    shutil.copytree(store.root, other)
    victim = other / _victim(store)
    before = victim.read_bytes()
    for force in ([], ["--force"]):
        code = main(["sql", "SELECT * FROM rollouts", "--store", store.url, "--format",
                     "parquet", "--out", str(victim), *force])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith(f"error: --out {victim}: inside the store {other} ")
        assert err.count("\n") == 1
    code = main(["sql", "SELECT 1 AS x", "--store", store.url, "--format", "csv", "--out",
                 str(other / "result.csv")])
    assert code == 2 and "inside the store" in capsys.readouterr().err
    assert victim.read_bytes() == before and not (other / "result.csv").exists()
