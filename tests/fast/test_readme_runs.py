"""Every `alignflow run` line of README.md passes `--dry-run` as written (its placeholders —
`my_run.yaml`, `path/to/my_flow.py:my_flow`, `...` — given a stand-in), and the cheap one,
a user flow, runs for real. No model is prepared and no store is written by the dry runs."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from alignflow.cli import main

ROOT = Path(__file__).resolve().parents[2]
MY_FLOW = '''from alignflow.flows.engine import flow, task


@task
def double(x: int) -> int:
    return 2 * x


@flow
def my_flow(cfg: dict | None = None) -> int:
    return double((cfg or {}).get("x", 21))
'''


def readme_runs() -> list[list[str]]:
    """The argv of each `alignflow run` line of the README's code blocks (continuations
    joined, comments dropped)."""
    text = ROOT.joinpath("README.md").read_text().replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("alignflow run "):
            words = [w for w in shlex.split(line, comments=True) if w != "..."]
            out.append(words[1:])
    return out


RUNS = readme_runs()


@pytest.fixture
def here(tmp_path, monkeypatch, tiny_model_dir):
    """A folder holding the README's stand-ins, as the current directory."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my_run.yaml").write_text("actor:\n  model_name_or_path: tiny-llama\n")
    (tmp_path / "path" / "to").mkdir(parents=True)
    (tmp_path / "path" / "to" / "my_flow.py").write_text(MY_FLOW)
    for sub in ("examples",):
        (tmp_path / sub).symlink_to(ROOT / sub)
    return tmp_path


def test_the_readme_has_its_run_lines():
    assert len(RUNS) >= 8
    assert ["run", "grpo", "--use_tensorboard", "tb"] in RUNS


@pytest.mark.parametrize("argv", RUNS, ids=[" ".join(a[1:3]) for a in RUNS])
def test_readme_run_line_passes_its_dry_run(argv, here, capsys):
    assert main([*argv, "--dry-run", "--store", str(here / "store")]) == 0, capsys.readouterr()
    assert not (here / "store").exists()


def test_the_user_flow_line_runs_for_real(here, capsys):
    argv = next(a for a in RUNS if a[1].endswith(":my_flow"))
    assert main([*argv, "--executor", "inline", "--store", str(here / "store")]) == 0
    assert capsys.readouterr().out.strip().endswith("42")
