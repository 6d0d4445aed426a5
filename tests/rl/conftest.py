"""Shared settings of the RL flow tests: the tiny model on a toy rule reward."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def rl_sets(tiny_model_dir) -> list[str]:
    """A small, fast GRPO-family run on the tiny model: 8 prompts x 4 samples, 8 tokens."""
    return [f"model.pretrain={tiny_model_dir}", "data.max_samples=64",
            "generate.rollout_batch_size=8", "generate.n_samples_per_prompt=4",
            "generate.generate_max_len=8", "rewards.sources=rule:target:e",
            "optim.train_batch_size=16", "optim.micro_train_batch_size=8",
            "optim.actor_learning_rate=1e-2", "optim.critic_learning_rate=1e-2",
            "optim.lr_warmup_ratio=0", "num_threads=1"]
