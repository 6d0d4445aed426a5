"""A data folder is read one split at a time, its files split by name as HF datasets splits
them, and OpenRLHF's `NAME@DIR` specs read (issue 47, items 1 and 2).

The expectation, OpenRLHF's `blending_datasets` (openrlhf/datasets/utils.py, v0.9.0 to
0.11): a spec `NAME@DIR` is cut at "@" into `load_dataset(NAME, data_dir=DIR)`; a folder
(not `save_to_disk`) is `load_dataset(DIR)`; then `data = data[dataset_split]` when the
split is there (when it is not, the DatasetDict reaches `.select` and the run crashes).
`load_dataset` splits a folder by its file paths (datasets' data_files.py: sharded
`data/{split}-00000-of-00001.*` names, else folders, else files named for train /
validation / test, else all `train`); the first test asks the installed `datasets` itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pytest

from alignflow.errors import ConfigError
from alignflow.tasks.data import load_dataset_spec
from alignflow.tasks.data.files import read_for_check
from alignflow.tasks.data.splits import folder_splits

LAYOUTS = {
    "prefs": ["train_prefs.jsonl", "test_prefs.jsonl"],
    "sharded": ["data/train_prefs-00000-of-00001.jsonl", "data/test_prefs-00000-of-00001.jsonl",
                "data/train_sft-00000-of-00002.jsonl", "data/train_sft-00001-of-00002.jsonl"],
    "folders": ["train/a.jsonl", "train/b.jsonl", "dev/c.jsonl", "my_eval/d.jsonl"],
    "names": ["gsm8k-train.jsonl", "gsm8k_valid.jsonl", "eval.jsonl", "extra.jsonl"],
    "plain": ["a.jsonl", "sub/b.jsonl", ".hidden/c.jsonl"],
    "trainee": ["trainee.jsonl", "retrain.jsonl", "training.jsonl"],
}


def _folder(root: Path, files: list[str]) -> Path:
    for i, name in enumerate(files):
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps({"input": f"{name}:{j}", "label": str(i)}) + "\n"
                                for j in range(i + 1)))
    return root


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_a_folders_splits_are_the_ones_hf_datasets_finds(layout, tmp_path):
    folder = _folder(tmp_path / "d", LAYOUTS[layout])
    hf = datasets.load_dataset(str(folder), cache_dir=str(tmp_path / "cache"))
    ours = folder_splits(folder, (".jsonl",))
    assert list(ours) == list(hf)
    for split in hf:
        assert sorted(load_dataset_spec(str(folder), split)["input"]) == \
            sorted(hf[split]["input"]), split


def test_the_named_split_only_and_a_missing_one_refused_in_one_line(tmp_path):
    folder = _folder(tmp_path / "d", LAYOUTS["prefs"])  # train_prefs: 1 row, test_prefs: 2
    assert load_dataset_spec(str(folder), "train")["input"] == ["train_prefs.jsonl:0"]
    assert len(read_for_check(str(folder), "test")) == 2
    assert len(load_dataset_spec(str(folder))) == 1  # no split named: the first (train)
    with pytest.raises(ConfigError) as info:
        load_dataset_spec(str(folder), "train_prefs")
    message = str(info.value)
    assert "\n" not in message and "has no split 'train_prefs'" in message
    assert "train (train_prefs.jsonl); test (test_prefs.jsonl); name one of ['train', "\
           "'test']" in message
    sharded = _folder(tmp_path / "s", LAYOUTS["sharded"])  # here train_prefs is a split
    assert len(load_dataset_spec(str(sharded), "train_prefs")) == 1


def test_openrlhf_name_at_dir_specs(tmp_path):
    folder = _folder(tmp_path / "d", LAYOUTS["prefs"])
    (folder / "notes.csv").write_text("input,label\nx,1\n")
    assert load_dataset_spec(f"json@{folder}", "test")["input"] == [
        "test_prefs.jsonl:0", "test_prefs.jsonl:1"]
    assert read_for_check(f"csv@{folder}", "train").columns["input"] == ["x"]
    assert len(load_dataset_spec(f"{tmp_path}@d", "train")) == 1  # FOLDER@SUB
    refused = {"text@/x": r"not a loader alignflow reads \(json, csv, parquet\)",
               f"json@{tmp_path}/nope": "folder .*nope' does not exist \\(expected json@DIR",
               "json@": "expected NAME@DIR, e.g. json@/data/dir",
               f"{tmp_path}@nope": "is not a folder \\(FOLDER@SUB"}
    for spec, message in refused.items():
        with pytest.raises(ConfigError, match=message):
            load_dataset_spec(spec, "train")
    with pytest.raises(ConfigError, match=r"dataset 'nobody-here/no-data' is not alignflow"):
        load_dataset_spec("nobody-here/no-data@sub")  # a hub set's data_dir: offline here


def test_an_edit_inside_json_at_dir_changes_the_cache_stamp(tmp_path):
    from alignflow.tasks.offline.fingerprint import fingerprint

    folder = _folder(tmp_path / "d", LAYOUTS["prefs"])
    before = fingerprint(f"json@{folder}"), fingerprint(f"{tmp_path}@d")
    (folder / "train_prefs.jsonl").write_text('{"input": "edited", "label": "0"}\n')
    assert fingerprint(f"json@{folder}") != before[0]
    assert fingerprint(f"{tmp_path}@d") != before[1]
