"""The named offline datasets: GSM8K rows and labels, CHAMP preference pairs."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.tasks.data import gsm8k_label, load_dataset_spec


@pytest.fixture(scope="module")
def gsm8k():
    return load_dataset_spec("alignflow:gsm8k")


def test_gsm8k_rows_and_columns(gsm8k):
    assert len(gsm8k) == 1319
    assert gsm8k.column_names == ["question", "answer", "label", "input"]  # input: OpenRLHF's
    assert gsm8k[0]["question"].startswith("Janet’s ducks lay 16 eggs per day.")
    assert gsm8k[0]["answer"].endswith("#### 18")


def test_gsm8k_labels_by_hand(gsm8k):
    # rows checked by reading the solutions: 16-3-4=9 eggs * $2; 2 + 2/2 bolts; "#### 2,125"
    assert gsm8k[0]["label"] == "18"
    assert gsm8k[1]["label"] == "3"
    assert gsm8k[146]["label"] == "2125"
    assert gsm8k[201]["label"] == "114200"
    assert all(label.lstrip("-").replace(".", "").isdigit() for label in gsm8k["label"])


def test_gsm8k_label_rule():
    assert gsm8k_label("a\nb\n#### 1,000 ") == "1000"
    assert gsm8k_label("x\n#### -3.5") == "-3.5"
    with pytest.raises(ConfigError, match="no '#### N' line"):
        gsm8k_label("no final answer")


def test_gsm8k_sft():
    ds = load_dataset_spec("alignflow:gsm8k-sft")
    assert len(ds) == 1319 and ds.column_names == ["input", "output"]
    assert ds[0]["output"].endswith("#### 18")


def test_champ_pairs():
    ds = load_dataset_spec("alignflow:champ-pairs")
    assert len(ds) == 540
    assert {"prompt", "chosen", "rejected"} <= set(ds.column_names)
    assert all(p.strip() and c.strip() and r.strip()
               for p, c, r in zip(ds["prompt"], ds["chosen"], ds["rejected"], strict=True))
    assert all(c != r for c, r in zip(ds["chosen"], ds["rejected"], strict=True))
    assert sum(ds["rejected_has_mistake"]) == 444
    assert len(set(ds["problem_id"])) == 270
    first = ds[0]
    assert first["problem_id"] == "P_Combinatorics_1" and first["answer"] == "239"
    assert first["chosen"].endswith("x_6+y_6+z_6=70+99+70=239 such strings.")
    wrong = [r for r in ds.select(range(20)) if r["rejected_has_mistake"]]
    assert all(r["first_wrong_step"] and r["first_wrong_step"] in r["rejected"] for r in wrong)


def test_unknown_name_and_split():
    with pytest.raises(ConfigError, match=r"unknown dataset alignflow:nope; expected one of"):
        load_dataset_spec("alignflow:nope")
    with pytest.raises(ConfigError, match=r"has only split 'test', not 'validation'"):
        load_dataset_spec("alignflow:gsm8k", split="validation")
    assert len(load_dataset_spec("alignflow:gsm8k", split="train")) == 1319  # OpenRLHF's
