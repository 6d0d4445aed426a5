"""Three OpenRLHF launch scripts run through `alignflow run` (in process, inline executor):
the script's own flags with the tiny model and local data swapped in and its sizes shrunk to
a CPU run (tests/openrlhf_launch.py), two iterations / optimizer steps each. `--save_path`
(`--ckpt.output_dir`) must receive the final HF folder; the SFT script's
`--load_checkpoint --ckpt_path` started again resumes its run instead of starting a new one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from alignflow.cli import main
from tests.openrlhf_launch import load, places, resized, swapped

pytestmark = pytest.mark.slow

RL_SIZES = {"n_samples_per_prompt": "2", "micro_train_batch_size": "2", "train_batch_size": "4",
            "micro_rollout_batch_size": "2", "rollout_batch_size": "2", "max_len": "48",
            "max_new_tokens": "4", "max_samples": "4"}
DPO_SIZES = {"train.batch_size": "2", "train.micro_batch_size": "1", "data.max_len": "48",
             "data.max_samples": "4"}
SFT_SIZES = {"train_batch_size": "2", "micro_train_batch_size": "2", "max_len": "48",
             "max_samples": "4"}
CASES = [("02_grpo_rule_reward_flat.sh", RL_SIZES, "train.max_iterations=2"),
         ("30_dpo_dotted.sh", DPO_SIZES, "train.max_steps=2"),
         ("09_sft_flat.sh", SFT_SIZES, "train.max_steps=2")]


def _command(script: str, sizes: dict[str, str], cap: str, where: dict[str, str],
             store: Path) -> list[str]:
    launch = load(script)
    flags = resized(swapped(launch, where), sizes)
    return ["run", launch.flow, *flags, "--ignore-hardware", "--executor", "inline",
            "--store", str(store), "--set", cap, "--set", "num_threads=1"]


def _runs(store: Path) -> list[Path]:
    return sorted(p.parent for p in store.rglob("run.json"))


@pytest.mark.parametrize("script,sizes,cap", CASES)
def test_script_runs_two_iterations(script, sizes, cap, tmp_path, tiny_model_dir, tiny_rm_dir,
                                    capsys):
    where = places(tmp_path, tiny_model_dir)
    store = tmp_path / "store"
    assert main(_command(script, sizes, cap, where, store)) == 0
    out = capsys.readouterr()
    assert "note:" in out.err  # hardware flags and differences said out loud
    result = json.loads(out.out.strip().splitlines()[-1])
    if "iterations" in result:
        assert result["iterations"] == 2 and len(result["reward_mean"]) == 2
    saved = Path(where["out"])
    assert (saved / "config.json").is_file(), f"--save_path got nothing: {sorted(saved.iterdir())}"
    if {"--load_checkpoint", "--ckpt.load_enable"} & set(load(script).flags):
        assert main(_command(script, sizes, cap, where, store)) == 0
        assert len(_runs(store)) == 1, "started again, the run is resumed, not repeated"
