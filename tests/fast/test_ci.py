"""CI runs what the suite needs: `.ci/run` installs Debian's chromium when it is missing
(quietly), requires it for the report's browser test, and runs the one test command."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_ci_installs_chromium_then_runs_make_test(tmp_path):
    script = (ROOT / ".ci/run").read_text()
    assert os.access(ROOT / ".ci/run", os.X_OK)
    assert "apt-get install -y -qq chromium" in script
    assert "export ALIGNFLOW_REQUIRE_CHROMIUM=1" in script
    assert script.rstrip().endswith("make test")  # the one test command, last
    # with apt-get and make stubbed: chromium missing -> installed, then `make test`
    calls = tmp_path / "calls"
    for tool, body in (("apt-get", f'echo "apt-get $*" >> {calls}'),
                       ("make", f'echo "make $* $ALIGNFLOW_REQUIRE_CHROMIUM" >> {calls}'),
                       ("id", "echo 0")):
        (tmp_path / tool).write_text(f"#!/bin/sh\n{body}\n")
        (tmp_path / tool).chmod(0o755)
    (tmp_path / "dirname").symlink_to(shutil.which("dirname"))
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}  # no chromium on this PATH
    out = subprocess.run([shutil.which("bash"), str(ROOT / ".ci/run")], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert calls.read_text().splitlines() == ["apt-get install -y -qq chromium", "make test 1"]
