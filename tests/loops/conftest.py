"""Shared settings of the loop tests: the tiny model on the toy rule reward `rule:target:e`."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def loop_sets(tiny_model_dir) -> list[str]:
    """16 prompts x 8 samples of 8 tokens per round, 2 rounds, one thread."""
    return [f"model.pretrain={tiny_model_dir}", "data.max_samples=64",
            "generate.rollout_batch_size=16", "generate.n_samples_per_prompt=8",
            "generate.generate_max_len=8", "rewards.sources=rule:target:e",
            "train.train_batch_size=4", "train.micro_train_batch_size=2",
            "train.max_epochs=4", "train.save_steps=4", "train.learning_rate=1e-2",
            "rounds=2", "num_threads=1"]
