"""The simulated-cluster tests' fixtures: the small GRPO run they share, and the offline
tests' DPO data (the cluster, its store and the single-process runs: tests/fixtures/simulated.py)."""

from __future__ import annotations

import pytest

from tests.offline.conftest import base_sets, pairs_file  # noqa: F401
from tests.sim.checks import LR


@pytest.fixture(scope="session")
def grpo_sets(tiny_model_dir) -> list[str]:
    """tests/rl's small GRPO run with a KL term (so a reference), 2 iterations."""
    return [f"actor.model_name_or_path={tiny_model_dir}", "data.max_samples=64",
            "rollout.batch_size=8", "rollout.n_samples_per_prompt=4",
            "rollout.max_new_tokens=8", "rollout.micro_batch_size=8",
            "reward.sources=rule:target:e", "train.batch_size=16", "train.micro_batch_size=8",
            f"actor.adam.lr={LR}", "actor.lr_warmup_ratio=0", "num_threads=1",
            "train.max_iterations=2", "algo.kl.init_coef=0.01", "placement.num_cpus=0.5"]
