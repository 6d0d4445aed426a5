"""DPO/RM on a `prompt, chosen, rejected` file with `data.prompt_key` unset say that the
prompt column is not read (issue 47, item 4).

The expectation, OpenRLHF 0.11 (openrlhf/datasets/reward_dataset.py `preprocess_data`,
and train_dpo's `--data.prompt_key` default None): without a prompt key and without a chat
template, `prompt = ""` and the pair is `data[chosen_key]`, `data[rejected_key]` alone.
alignflow keeps that meaning and prints a note at the start and in `--dry-run`.
"""

from __future__ import annotations

import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from alignflow.flows.cli.run_config import check_run

ROW = {"prompt": "2+2?", "chosen": "4", "rejected": "5"}


def _notes(flow: str, *flags: str) -> list[str]:
    return [n for n in check_run(flow, None, [], list(flags)).notes
            if "data.prompt_key is unset" in n]


@pytest.mark.parametrize("flow", ["dpo", "rm"])
def test_a_prompt_column_left_unread_is_noted(flow, tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps(ROW) + "\n")
    [note] = _notes(flow, "--dataset", str(path))
    assert f"'prompt' column of {path} is not read" in note and "--prompt_key prompt" in note
    assert _notes(flow, "--dataset", str(path), "--prompt_key", "prompt") == []


def test_no_note_without_a_prompt_column_and_parquet_read_by_schema(tmp_path):
    bare = tmp_path / "bare.jsonl"
    bare.write_text(json.dumps({"chosen": "4", "rejected": "5"}) + "\n")
    assert _notes("dpo", "--dataset", str(bare)) == []
    pq.write_table(pa.Table.from_pylist([ROW]), tmp_path / "p.parquet")
    assert len(_notes("dpo", "--dataset", str(tmp_path / "p.parquet"))) == 1
