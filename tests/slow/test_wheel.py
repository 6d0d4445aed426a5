"""A wheel built from the repo holds every subpackage under `alignflow/` and the SQL files."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


def test_wheel_contents(tmp_path):
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                    "-q", "-w", str(tmp_path), str(ROOT)], check=True, capture_output=True)
    (wheel,) = tmp_path.glob("alignflow-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for module in ("alignflow/cli.py", "alignflow/flows/engine.py", "alignflow/flows/rl/grpo.py",
                   "alignflow/tasks/rl/learn.py", "alignflow/artifacts/store.py",
                   "alignflow/catalog/catalog.py", "alignflow/catalog/data.sql"):
        assert module in names, module
    assert not any(n.startswith(("tests/", "bench/", "flows/", "tasks/")) for n in names)
    entry = next(n for n in names if n.endswith("entry_points.txt"))
    assert "alignflow = alignflow.cli:main" in zipfile.ZipFile(wheel).read(entry).decode()
