"""`alignflow demo` (on the tiny model, two short iterations) prints the held-out correctness
at the start and the end, and ends with its HTML report."""

from __future__ import annotations

from pathlib import Path

import pytest

from alignflow.cli import main

pytestmark = pytest.mark.slow


def test_demo_ends_with_the_path_of_its_report(tiny_model_dir, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    sets = [f"actor.model_name_or_path={tiny_model_dir}", "train.max_iterations=2",
            "rollout.max_new_tokens=8", "data.max_samples=16", "data.prompt_max_len=512",
            "num_threads=1", "eval.steps=2"]
    argv = ["demo", "--store", str(tmp_path / "store"), "--executor", "inline"]
    for item in sets:
        argv += ["--set", item]
    assert main(argv) == 0
    out = capsys.readouterr().out
    # the headline: held-out correctness before training and after the last iteration
    assert "held-out correctness (16 prompts, iteration -1 -> 1): " in out
    last = out.strip().splitlines()[-1]
    assert last.startswith("The report (learning curves, samples, step times): ")
    report = Path(last.rsplit(": ", 1)[1])
    assert report.parent == tmp_path and report.name.startswith("report-grpo-")
    page = report.read_text()
    assert "<img" in page and "Learning curves" in page
