"""An evaluation that reads the prompts the run trains on is said before the run (issue 43:
`eval.split` defaults to train, as OpenRLHF's `--eval_split`, so a generated set's held-out
`test` split must be asked for)."""

from __future__ import annotations

from alignflow.cli import main


def _notes(tmp_path, capsys, *flags: str) -> list[str]:
    argv = ["run", "grpo", "--prompt_data", "alignflow:arith", "--eval_dataset",
            "alignflow:arith", "--eval_steps", "2", *flags, "--dry-run", "--store",
            str(tmp_path / "store")]
    assert main(argv) == 0
    return [x for x in capsys.readouterr().out.splitlines() if x.startswith("note: eval.split")]


def test_evaluating_the_training_split_is_said(tmp_path, capsys):
    (line,) = _notes(tmp_path, capsys)
    assert line.startswith("note: eval.split=train: evaluation reads the prompts training")
    assert "--eval_split test" in line


def test_a_held_out_split_says_nothing(tmp_path, capsys):
    assert _notes(tmp_path, capsys, "--eval_split", "test") == []
