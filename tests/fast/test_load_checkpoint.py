"""OpenRLHF's `--load_checkpoint` (a re-run of the same command resumes its run) applies the
flags given now where the run can follow them, and refuses the rest in one line naming
each key, instead of silently continuing with the stored config."""

from __future__ import annotations

import json

from alignflow.artifacts.store import Store
from alignflow.cli import main
from alignflow.flows.journal import runs


def _argv(tmp_path, tiny_model_dir, *extra: str) -> list[str]:
    data = tmp_path / "sft.jsonl"
    if not data.exists():
        data.write_text("".join(json.dumps({"input": f"q{i}", "output": f"a{i}"}) + "\n"
                                for i in range(4)))
    return ["run", "sft", "--pretrain", str(tiny_model_dir), "--dataset", str(data),
            "--input_key", "input", "--output_key", "output", "--max_len", "32",
            "--train_batch_size", "2", "--micro_train_batch_size", "2", "--max_epochs", "1",
            "--load_checkpoint", "--ckpt_path", str(tmp_path / "ckpt"), "--executor", "inline",
            "--store", str(tmp_path / "store"), *extra]


def _killed_before_export(store, run_id: str) -> None:
    (store / "runs" / run_id / "tasks" / "export.json").unlink()
    runs.update_run(Store.open(str(store)), run_id, status=runs.RUNNING)  # lease released


def test_a_rerun_with_other_flags_follows_or_refuses_them(tmp_path, tiny_model_dir, capsys):
    assert main(_argv(tmp_path, tiny_model_dir, "--learning_rate", "1e-5")) == 0
    run_id = next((tmp_path / "store" / "runs").iterdir()).name
    assert main(_argv(tmp_path, tiny_model_dir, "--learning_rate", "3e-5")) == 0
    assert f"warning: config keys given now differ from run {run_id}'s and are not used: " \
        "adam.lr; start a new run" in capsys.readouterr().err  # it had finished
    _killed_before_export(tmp_path / "store", run_id)
    assert main(_argv(tmp_path, tiny_model_dir, "--learning_rate", "2e-5")) == 0
    assert f"note: run {run_id} continues with the config given now: adam.lr 1e-05 → 2e-05" \
        in capsys.readouterr().err
    _killed_before_export(tmp_path / "store", run_id)
    assert main(_argv(tmp_path, tiny_model_dir, "--learning_rate", "2e-5",
                      "--zero_stage", "2")) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(f"error: resume of run {run_id!r} refused: config keys changed that "
                          "the run cannot follow: ds.zero_stage None → 2 (model trainer torch → "
                          "deepspeed")
