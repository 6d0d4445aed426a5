"""What `alignflow sql` loads before its first answer (issue 46: ~2× a bare DuckDB process
at 100 tasks, the gap imports and databases). A query over every view (`SELECT 42` builds
them all, empty ones included) imports neither torch, Ray, pandas, psutil nor any of the
engine or steps (the CLI's GPU probe imported `alignflow.tasks` and the store, an empty
view's Arrow table pandas: 0.3 CPU s), and opens two DuckDB databases: the catalog's and
the read-only guard's, which also renders the result (each is ~0.03-0.05 CPU s)."""

from __future__ import annotations

import json
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


def test_sql_loads_no_engine_torch_ray_or_pandas_and_two_databases(tmp_path):
    from alignflow.artifacts.store import Store

    store = Store.open(str(tmp_path / "store"))  # a run with no task yet: every view empty
    store.write_json("runs/r/run.json", {"run_id": "r", "flow": "sft", "seed": 0})
    proc = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "store")], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert "42" in proc.stdout
    seen = json.loads(lines[-1])
    assert seen == {"code": 0, "databases": 2, "loaded": []}, seen
