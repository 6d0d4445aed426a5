"""A flow started by a script (`python my_flow.py`, types defined in `__main__`) fails,
is fixed, and is resumed by `alignflow resume` in another process: the replayed records
decode into the script's own classes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = '''
import dataclasses, os, sys
from alignflow import flow, journal_record, run, task

FLAG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fail")

@journal_record
@dataclasses.dataclass(frozen=True)
class Out:
    v: int

@task
def one(i):
    if i == 1 and os.path.exists(FLAG):
        raise ValueError("flagged")
    return Out(i)

@flow
def main_flow(cfg):
    return [one(i) for i in range(2)]

if __name__ == "__main__":
    run(main_flow, None, store=sys.argv[1], run_id="m", executor="inline")
'''


def test_script_flow_resumed_from_the_cli(tmp_path):
    script, store = tmp_path / "my_flow.py", str(tmp_path / "store")
    script.write_text(SCRIPT)
    (tmp_path / "fail").write_text("")
    first = subprocess.run([sys.executable, str(script), store], cwd=ROOT, capture_output=True,
                           text=True, timeout=120)
    assert first.returncode != 0 and "flagged" in first.stderr
    (tmp_path / "fail").unlink()
    resumed = subprocess.run([sys.executable, "-m", "alignflow.cli", "resume", "m", "--store",
                              store, "--flow", f"{script}:main_flow"], cwd=ROOT,
                             capture_output=True, text=True, timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    out = resumed.stdout.strip()
    assert out.count('"fields":{"v":') == 2 and out.count("alignflow_user_my_flow_") == 2
