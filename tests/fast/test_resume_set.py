"""Fix and resume (issue 47, item 12): every data set's columns are checked before a run
starts (an RL eval set too: it failed minutes in), and `alignflow resume RUN --set
KEY=VALUE` changes keys no committed task has fixed, refusing in one line, naming the
committed task, a key one has (`flows/control/reconfigure.py` judges, as it does for a
re-run of the command).

The expectation, OpenRLHF 0.11: the eval set is read with the training data's
`--data.input_key` (`PromptDataset(eval_data, ..., input_key)` in ppo_trainer's
`prepare_datasets`), and a run is continued by giving the command again with
`--ckpt.load_enable`; alignflow's `resume --set` is that, for one key.
"""

from __future__ import annotations

import json

import pytest

from alignflow.artifacts.store import Store
from alignflow.cli import main
from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run
from alignflow.flows.config.build import with_sets
from alignflow.flows.control.reconfigure import check
from alignflow.flows.journal import runs


def test_an_rl_eval_set_without_the_input_column_is_refused_before_the_run(tmp_path):
    bad = tmp_path / "eval.jsonl"
    bad.write_text(json.dumps({"question": "2+2?", "answer": "4"}) + "\n")
    with pytest.raises(ConfigError, match=r"config key 'eval.dataset' = .*eval.jsonl': key "
                       r"'input' not found .*its keys are \['question', 'answer'\]"):
        check_run("grpo", None, [], ["--eval_dataset", str(bad), "--eval_steps", "1"])
    assert check_run("grpo", None, [], ["--eval_dataset", str(bad), "--input_key", "question",
                                        "--label_key", "answer", "--eval_steps", "1", "--prompt_data",
                                        str(bad)]).config.eval.dataset == str(bad)


def _run(tmp_path, tiny_model_dir) -> str:
    data = tmp_path / "sft.jsonl"
    data.write_text("".join(json.dumps({"input": f"q{i}", "output": f"a{i}"}) + "\n"
                            for i in range(4)))
    assert main(["run", "sft", "--pretrain", str(tiny_model_dir), "--dataset", str(data),
                 "--input_key", "input", "--output_key", "output", "--max_len", "32",
                 "--train_batch_size", "2", "--micro_train_batch_size", "2",
                 "--max_epochs", "1", "--executor", "inline",
                 "--store", str(tmp_path / "store")]) == 0
    return next((tmp_path / "store" / "runs").iterdir()).name


def _killed(tmp_path, run_id: str, *tasks: str) -> None:
    """As if the driver died before `tasks` committed (all of them: none)."""
    folder = tmp_path / "store" / "runs" / run_id / "tasks"
    for f in folder.rglob("*.json"):
        if not tasks or f.stem in tasks:
            f.unlink()
    runs.update_run(Store.open(str(tmp_path / "store")), run_id, status=runs.RUNNING)


def _resume(tmp_path, run_id: str, *sets: str) -> int:
    return main(["resume", run_id, "--store", str(tmp_path / "store"),
                 *[a for s in sets for a in ("--set", s)]])


def _recorded(tmp_path, run_id: str, section: str, key: str):
    """The value run.json records for `section.key` (its config, encoded)."""
    meta = json.loads((tmp_path / "store" / "runs" / run_id / "run.json").read_text())
    return meta["config"]["fields"][section]["fields"][key]


def test_resume_set_follows_a_key_no_committed_task_fixed(tmp_path, tiny_model_dir, capsys):
    run_id = _run(tmp_path, tiny_model_dir)
    _killed(tmp_path, run_id, "export")
    assert _resume(tmp_path, run_id, "adam.lr=2e-5") == 0
    assert f"note: run {run_id} continues with the config given now: adam.lr 5e-06 → 2e-05" \
        in capsys.readouterr().err
    assert _recorded(tmp_path, run_id, "adam", "lr") == 2e-5
    _killed(tmp_path, run_id)  # nothing committed: the data keys are free too
    assert _resume(tmp_path, run_id, "data.max_samples=3") == 0
    assert _recorded(tmp_path, run_id, "data", "max_samples") == 3


def test_resume_set_refuses_a_key_a_committed_task_read(tmp_path, tiny_model_dir, capsys):
    run_id = _run(tmp_path, tiny_model_dir)
    _killed(tmp_path, run_id, "export")
    capsys.readouterr()
    assert _resume(tmp_path, run_id, "data.max_samples=3") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"error: resume of run {run_id!r} refused: config keys changed "
                              "that the run cannot follow: data.max_samples 1000000 → 3 "
                              "(task 'prepare' used it and is committed)")
    assert _resume(tmp_path, run_id, "adam.nope=1") == 2
    assert "unknown config key 'adam.nope'" in capsys.readouterr().err
    assert main(["resume", "--all", "--set", "adam.lr=1", "--store",
                 str(tmp_path / "store")]) == 2


def test_an_rl_eval_split_is_fixed_once_the_eval_prompts_are_committed():
    old = check_run("grpo", None, [], [], check=False).config
    new = with_sets(old, ["eval.split=test"])
    assert check({"run_id": "r"}, old, new, set()) == {"eval.split": ("train", "test")}
    with pytest.raises(ConfigError, match=r"eval.split 'train' → 'test' \(task 'eval_prompts' "
                                          r"used it and is committed\)"):
        check({"run_id": "r"}, old, new, {"eval_prompts", "prompts"})
