"""What `alignflow sql` loads before its first answer (issue 46: ~2× a bare DuckDB process
at 100 tasks, the gap imports and databases). A query over every view (`SELECT 42` builds
them all, empty ones included) imports neither torch, Ray, pandas, psutil nor any of the
engine or steps (the CLI's GPU probe imported `alignflow.tasks` and the store, an empty
view's Arrow table pandas: 0.3 CPU s), and opens one DuckDB database, the catalog's: the
read-only guard parses on it (`guard.parsing_on`) and DuckDB renders the result from it
(each database is ~0.015 CPU s to open and close, a tenth of a bare DuckDB process). Nor,
for the default table format, pyarrow or numpy (~0.08 CPU s, a bare DuckDB process's
whole query at 100 tasks): DuckDB holds and renders the result itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = r"""
import json, sys
import duckdb
opened = []
connect = duckdb.connect
def counted(*args, **kwargs):
    opened.append(args[:1])
    return connect(*args, **kwargs)
duckdb.connect = counted
from alignflow.cli import main
code = main(["sql", "SELECT 42 AS answer", "--store", sys.argv[1]])
heavy = ("torch", "ray", "pandas", "psutil", "alignflow.tasks", "alignflow.flows")
print(json.dumps({"code": code, "databases": len(opened),
                  "loaded": sorted(m for m in heavy if m in sys.modules)}))
"""


def test_sql_loads_no_engine_torch_ray_or_pandas_and_one_database(tmp_path):
    from alignflow.artifacts.store import Store

    store = Store.open(str(tmp_path / "store"))  # a run with no task yet: every view empty
    store.write_json("runs/r/run.json", {"run_id": "r", "flow": "sft", "seed": 0})
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "store")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert "42" in proc.stdout
    seen = json.loads(lines[-1])
    assert seen == {"code": 0, "databases": 1, "loaded": []}, seen


NO_ARROW = """
import json, sys
from alignflow.artifacts import urls
made = []
filesystem = urls.filesystem
def counted(*args, **kwargs):
    made.append(args[:1])
    return filesystem(*args, **kwargs)
urls.filesystem = counted
from alignflow.artifacts.backends import base, local
base.filesystem = local.filesystem = counted
from alignflow.cli import main
code = main(["sql", sys.argv[2], "--store", sys.argv[1]])
print(json.dumps({"code": code, "filesystems": len(made),
                  "loaded": sorted(m for m in ("pyarrow", "numpy", "pandas") if m in sys.modules)}))
"""


def _answers(tmp_path, queries: list[str]) -> list[dict]:
    """What each `alignflow sql QUERY` loaded, in a fresh process each, over a store of one
    committed rollouts file (one local index for them all)."""
    from alignflow.artifacts.commit import commit
    from alignflow.artifacts.parquet_io import write_table
    from alignflow.artifacts.store import Store
    from tests.fast.test_catalog_data import _rollouts

    store = Store.open(str(tmp_path / "store"))
    store.write_json("runs/r1/run.json", {"run_id": "r1", "flow": "grpo", "seed": 0})
    ref = write_table(store, "rollouts", _rollouts("r1", 0), run_id="r1", task="generate",
                      partition={"iter": 0})
    commit(store, "r1", "iter-0000/generate", {"artifacts": [ref]})
    seen = []
    for query in queries:
        proc = subprocess.run([sys.executable, "-c", NO_ARROW, store.url, query],
                              cwd=ROOT, capture_output=True, text=True, timeout=120,
                              env={**os.environ, "ALIGNFLOW_CATALOG_CACHE": str(tmp_path / "c")})
        assert proc.returncode == 0, proc.stderr[-3000:]
        seen.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return seen


def test_a_table_answer_loads_no_pyarrow_numpy_or_filesystem(tmp_path):
    """The package's own `__init__` imports its Arrow names on use (issue 46: it imported
    pyarrow for any `alignflow.artifacts.*`, ~0.1 CPU s), and a local store makes no fsspec
    filesystem unless a library asks for one (the cold opening's footer reads do)."""
    # twice each: the first opening checks the footers (schema names from schemas.py, which
    # is Arrow, read through fsspec); the second, as every later one, finds them in the index
    seen = _answers(tmp_path, ["SELECT count(*) AS n FROM rollouts",
                               "SELECT count(*) AS n FROM tasks"] * 2)
    assert seen[2:] == [{"code": 0, "filesystems": 0, "loaded": []}] * 2, seen


FSSPEC = """
import sys
from alignflow.cli import main
main(["sql", "SELECT count(*) FROM rollouts", "--store", sys.argv[1]])
print("fsspec" in sys.modules)
"""


def test_a_local_store_imports_no_fsspec(tmp_path):
    _answers(tmp_path, ["SELECT count(*) AS n FROM rollouts"])  # the index, made once
    proc = subprocess.run([sys.executable, "-c", FSSPEC, str(tmp_path / "store")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "ALIGNFLOW_CATALOG_CACHE": str(tmp_path / "c")})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "False"  # asyncio & co: ~0.04 CPU s
