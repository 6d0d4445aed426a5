"""Shared settings of the loop tests: the tiny model on the toy rule reward `rule:target:e`."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def loop_sets(tiny_model_dir) -> list[str]:
    """16 prompts x 8 samples of 8 tokens per round, 2 rounds, one thread."""
    return [f"model.model_name_or_path={tiny_model_dir}", "data.max_samples=64",
            "rollout.batch_size=16", "rollout.n_samples_per_prompt=8",
            "rollout.max_new_tokens=8", "reward.sources=rule:target:e",
            "train.batch_size=4", "train.micro_batch_size=2",
            "train.max_epochs=4", "ckpt.save_steps=4", "adam.lr=1e-2",
            "rounds=2", "num_threads=1"]
