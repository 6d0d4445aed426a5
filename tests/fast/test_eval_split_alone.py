"""`--eval_split` without `--eval_dataset` (offline flows) evaluates on that split of the
training data (issue 47, item 3); it used to evaluate nothing, silently.

The expectation, OpenRLHF v0.5 to v0.6's `blending_datasets(..., return_eval=True,
eval_split=args.eval_split)` (openrlhf/utils/utils.py): for each training source, `eval_data
= data[eval_split]` when the source has that split, else the first 3% of its training rows
(the TODO there: "train will contains eval?"); v0.7 on evaluates only an `--eval_dataset`.
alignflow takes the named split of a folder or hub set, and refuses a source of one split
(a file: evaluating on the training rows themselves) or a split the folder lacks.
"""

from __future__ import annotations

import json

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run
from alignflow.tasks.offline.prepare import split_data

ROW = {"prompt": "p", "chosen": "c", "rejected": "r"}


@pytest.fixture()
def folder(tmp_path):
    for name, n in (("train.jsonl", 3), ("test.jsonl", 2)):
        (tmp_path / name).write_text("".join(json.dumps({**ROW, "prompt": f"{name}{i}"}) + "\n"
                                             for i in range(n)))
    return tmp_path


def _dpo(*flags: str):
    return check_run("dpo", None, [], ["--prompt_key", "prompt", *flags])


def test_eval_split_alone_takes_that_split_of_the_training_folder(folder):
    checked = _dpo("--dataset", str(folder), "--eval_split", "test")
    assert checked.config.eval.dataset == str(folder)
    assert any("--eval_split without --eval_dataset evaluates on that split" in n
               for n in checked.notes)
    train, held = split_data(checked.config.prepare_spec)
    assert sorted(held["prompt"]) == ["test.jsonl0", "test.jsonl1"] and len(train) == 3


def test_the_default_eval_split_starts_no_evaluation(folder):
    assert _dpo("--dataset", str(folder)).config.eval.dataset is None


def test_a_split_the_source_lacks_or_a_single_file_is_refused_in_one_line(folder):
    with pytest.raises(ConfigError, match=r"^config key 'eval.split of data.dataset' = .*"
                       r"has no split 'validation'.*name one of \['train', 'test'\]$"):
        _dpo("--dataset", str(folder), "--eval_split", "validation")
    with pytest.raises(ConfigError, match=r"^eval.split = 'test' \(--eval_split\) without "
                       r"eval.dataset .*train.jsonl' has one split only; give --eval_dataset"):
        _dpo("--dataset", str(folder / "train.jsonl"), "--eval_split", "test")
