"""Selection and training-order helpers of the loops, on hand-made rewards (no Ray)."""

from __future__ import annotations

import pytest

from alignflow.artifacts.errors import ConfigError
from alignflow.tasks.loops.plan import LoopTrainConfig, chunk_minibatches
from alignflow.tasks.loops.select import Pair, best_of_n, best_vs_worst, group_rewards

GROUPS = group_rewards(["a", "a", "a", "b", "b", "c", "c"], [0, 1, 2, 0, 1, 0, 1],
                       [0.2, 0.9, 0.9, 0.5, 0.5, 0.1, 0.4])


def test_best_of_n_takes_the_max_lowest_index_on_ties():
    assert best_of_n(GROUPS) == [("a", 1, 0.9), ("b", 0, 0.5), ("c", 1, 0.4)]


def test_best_of_n_threshold_drops_weak_prompts():
    assert best_of_n(GROUPS, threshold=0.45) == [("a", 1, 0.9), ("b", 0, 0.5)]


def test_best_vs_worst_skips_ties_and_small_gaps():
    assert best_vs_worst(GROUPS) == [Pair("a", 1, 0, 0.9, 0.2), Pair("c", 1, 0, 0.4, 0.1)]
    assert best_vs_worst(GROUPS, margin=0.5) == [Pair("a", 1, 0, 0.9, 0.2)]


def test_chunks_split_the_round_order_exactly():
    cfg = LoopTrainConfig(train_batch_size=4, micro_train_batch_size=2, max_epochs=2,
                          save_steps=3)
    whole = chunk_minibatches(10, LoopTrainConfig(train_batch_size=4, micro_train_batch_size=2,
                                                  max_epochs=2), seed=7, chunk=0)
    assert cfg.steps(10) == 6 and cfg.chunks(10) == 2
    parts = chunk_minibatches(10, cfg, 7, 0) + chunk_minibatches(10, cfg, 7, 1)
    assert parts == whole and [len(b) for b in whole] == [4, 4, 2, 4, 4, 2]
    assert sorted(i for b in whole[:3] for i in b) == list(range(10))  # one epoch = a permutation
    assert chunk_minibatches(10, cfg, 8, 0) != parts[:3]  # the seed matters


def test_train_config_refuses_bad_values():
    with pytest.raises(ConfigError, match="save_steps=0"):
        LoopTrainConfig(save_steps=0)
    with pytest.raises(ConfigError, match="micro_train_batch_size=3"):
        LoopTrainConfig(train_batch_size=4, micro_train_batch_size=3)
    assert LoopTrainConfig().chunks(0) == 0
