"""The CLI fault sweep (bench/fault_sweep.py) in the suite: the cases that need neither Ray,
S3 nor root must each be judged clear (one line naming the thing, nothing leaked)."""

from __future__ import annotations

import importlib.util
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"
_spec = importlib.util.spec_from_file_location("fault_sweep", BENCH / "fault_sweep.py")
sweep = sys.modules["fault_sweep"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(sweep)

GROUPS = {"corrupt or foreign file in the store", "a deletion cut short",
          "a bad command line", "a secret in an error", "another driver holds the run"}
CASES = [c for c in sweep.CASES if c.group in GROUPS]

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_sweep_case_is_clear(case):
    tmp = Path(tempfile.mkdtemp(prefix="af-sweep-test-"))
    ctx = sweep.Context(tmp)
    try:
        case.setup(ctx)
        out = sweep.judge(case, ctx, sweep._run(ctx, case.argv(ctx)))
    finally:
        ctx.cleanup()
        shutil.rmtree(tmp, ignore_errors=True)
    assert out.verdict == "clear", (out.detail, out.lines)
