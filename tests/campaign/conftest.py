"""A small campaign on the tiny model: GRPO rounds on the toy rule reward `rule:target:e`,
prompt files dropped into a folder, a gate on 8 fixed prompts. Round runs run inline."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml


def write_prompts(path: Path, start: int, n: int) -> Path:
    """A JSONL prompt file (question, label), written whole (temp name, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps({"question": f"say e {i}", "label": "e"}) + "\n"
                           for i in range(start, start + n)))
    tmp.rename(path)
    return path


@pytest.fixture
def campaign_files(tmp_path, tiny_model_dir):
    """(config path, inputs folder): rounds every hour, at most 2."""
    inputs = tmp_path / "incoming"
    inputs.mkdir()
    gate = write_prompts(tmp_path / "gate.jsonl", 100, 8)
    cfg = {
        "name": "tiny", "flow": "grpo", "executor": "inline", "max_rounds": 2,
        "config": {
            "actor": {"model_name_or_path": str(tiny_model_dir), "adam": {"lr": 1e-2},
                      "lr_warmup_ratio": 0},
            "rollout": {"batch_size": 4, "n_samples_per_prompt": 4, "max_new_tokens": 8,
                        "micro_batch_size": 16},
            "algo": {"kl": {"init_coef": 0}},
            "data": {"input_key": "question", "label_key": "label"},
            "reward": {"sources": ["rule:target:e"]},
            "train": {"batch_size": 16, "micro_batch_size": 8, "max_iterations": 2},
            "num_threads": 1,
        },
        "inputs": {"source": "incoming", "pattern": "*.jsonl"},
        "schedule": {"every": "1h"},
        "gate": {"prompts": str(gate), "rewards": ["rule:target:e"], "max_samples": 8,
                 "apply_chat_template": False, "max_new_tokens": 8, "metric": "reward_mean"},
        "retention": {"keep_rounds": 1},
    }
    path = tmp_path / "campaign.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path, inputs


class Clock:
    """`time.time()` shifted by an offset the test advances (everything in-process sees it:
    schedules, durable sleeps, leases), so hour-long schedules run in seconds."""

    def __init__(self, monkeypatch) -> None:
        import time

        self.offset, self._real = 0.0, time.time
        monkeypatch.setattr(time, "time", lambda: self._real() + self.offset)

    def advance(self, seconds: float) -> None:
        self.offset += seconds


@pytest.fixture
def clock(monkeypatch) -> Clock:
    return Clock(monkeypatch)
