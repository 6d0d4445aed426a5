"""The commands that read a store (`status`, `ls`, `resume` of a finished run) import no
torch: their whole cost is Python's start plus the store reads (issue 25: status and resume
under a second). And `run --executor ray` starts Ray from the bare argv only when asked."""

from __future__ import annotations

import subprocess
import sys

from alignflow.flows.cli import early


def test_command_module_imports_no_torch() -> None:
    code = ("import sys, alignflow.cli, alignflow.flows.cli.commands, alignflow.flows.cli.views; "
            "heavy = sorted({'torch', 'transformers', 'datasets'} & set(sys.modules)); "
            "print(heavy); sys.exit(1 if heavy else 0)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_early_start_only_for_a_plain_local_ray_run(monkeypatch) -> None:
    started: list[str] = []
    monkeypatch.setattr(early, "start_ray_early", started.append)
    for argv in (["grpo"], ["grpo", "--executor", "inline"], ["grpo", "--executor", "ray",
                 "--address", "auto"], ["grpo", "--executor", "ray", "--dry-run"],
                 ["grpo", "--executor", "ray", "--detach"], ["--executor", "ray"],
                 ["grpo", "--executor", "ray", "--simulate-cluster", "2x1"]):
        early.start_ray_if_asked(argv)
    assert started == []
    early.start_ray_if_asked(["grpo", "--set", "a=1", "--executor", "ray", "--lr", "2"])
    assert started == ["grpo"]
