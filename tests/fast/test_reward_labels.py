"""A run whose reward cannot score anything is refused before it starts: a rule reward that
compares answers with labels (the default `rule:gsm8k`, `rule:correct`) on prompts without
usable labels would train on all-zero correctness rewards and exit 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.cli.run_config import check_run

ROOT = Path(__file__).resolve().parents[2]


def _check(tmp_path, rows, *flags):
    data = tmp_path / "q.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return check_run("grpo", None, [], ["--pretrain", "tiny-llama", "--prompt_data", str(data),
                                        "--input_key", "question",
                                        "--n_samples_per_prompt", "2", *flags])


def test_the_default_rule_without_a_label_column_is_refused(tmp_path):
    with pytest.raises(ConfigError) as info:
        _check(tmp_path, [{"question": "2+2?"}])
    assert str(info.value).startswith("reward source 'rule:gsm8k' (the default: no reward "
                                      "source named) compares each answer with its prompt's "
                                      "label, but data.label_key is null")
    assert "--label_key" in str(info.value) and "--remote_rm_url" in str(info.value)


def test_labels_that_hold_no_number_are_refused(tmp_path):
    with pytest.raises(ConfigError, match="column 'label' of .* holds none in its first 2 rows"):
        _check(tmp_path, [{"question": "2+2?", "label": "four"},
                          {"question": "3+3?", "label": "six"}], "--label_key", "label")


@pytest.mark.parametrize("flags", [("--label_key", "label"),
                                   ("--remote_rm_url", "examples/reward_funcs/gsm8k_reward.py")])
def test_usable_labels_or_a_reward_source_of_ones_own_pass(tmp_path, flags, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert _check(tmp_path, [{"question": "2+2?", "label": "4"}], *flags).config.reward.specs
