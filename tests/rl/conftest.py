"""Shared settings of the RL flow tests: the tiny model on a toy rule reward."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def rl_sets(tiny_model_dir) -> list[str]:
    """A small, fast GRPO-family run on the tiny model: 8 prompts x 4 samples, 8 tokens, in
    the chat template, without a KL term (OpenRLHF's defaults are sized for GPUs)."""
    return [f"actor.model_name_or_path={tiny_model_dir}", "data.max_samples=64",
            "rollout.batch_size=8", "rollout.n_samples_per_prompt=4",
            "rollout.max_new_tokens=8", "rollout.micro_batch_size=16",
            "data.apply_chat_template=true", "algo.kl.init_coef=0",
            "reward.sources=rule:target:e",
            "train.batch_size=16", "train.micro_batch_size=8",
            "actor.adam.lr=1e-2", "critic.adam.lr=1e-2",
            "actor.lr_warmup_ratio=0", "critic.lr_warmup_ratio=0", "num_threads=1"]
