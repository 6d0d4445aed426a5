"""`alignflow run FLOW --help` / `-h` prints the command's options and the flow's config keys
and exits 0, for every built-in flow (it printed "starting flow grpo", then refused
`--help` as an unknown OpenRLHF flag: issue 47, item 10)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from alignflow.cli import main
from alignflow.flows.registry import BUILTIN


@pytest.mark.parametrize("flow", sorted(BUILTIN))
def test_run_flow_help_lists_options_and_keys(flow, capsys):
    assert main(["run", flow, "--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: alignflow run {flow} [options]")
    assert "--dry-run" in out and "--help-config" in out
    assert ("keys (YAML file < --set KEY=VALUE < --KEY VALUE flags)" in out
            or "takes a plain dict config" in out)


def test_dash_h_from_the_shell_says_no_start_and_exits_0():
    done = subprocess.run([sys.executable, "-c", "import alignflow.cli; alignflow.cli.main()",
                           "run", "dpo", "-h"],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "starting flow" not in done.stderr and "unknown flag" not in done.stderr
    assert "usage: alignflow run dpo" in done.stdout and "beta" in done.stdout
