"""Selection and training-order helpers of the loops, on hand-made rewards (no Ray)."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.loops.config import LoopConfig
from alignflow.tasks.loops.select import Pair, best_of_n, best_vs_worst, group_rewards
from alignflow.tasks.trainers.plan import Plan

GROUPS = group_rewards(["a", "a", "a", "b", "b", "c", "c"], [0, 1, 2, 0, 1, 0, 1],
                       [0.2, 0.9, 0.9, 0.5, 0.5, 0.1, 0.4])


def test_best_of_n_takes_the_max_lowest_index_on_ties():
    assert best_of_n(GROUPS) == [("a", 1, 0.9), ("b", 0, 0.5), ("c", 1, 0.4)]


def test_best_of_n_threshold_drops_weak_prompts():
    assert best_of_n(GROUPS, threshold=0.45) == [("a", 1, 0.9), ("b", 0, 0.5)]


def test_best_vs_worst_skips_ties_and_small_gaps():
    assert best_vs_worst(GROUPS) == [Pair("a", 1, 0, 0.9, 0.2), Pair("c", 1, 0, 0.4, 0.1)]
    assert best_vs_worst(GROUPS, margin=0.5) == [Pair("a", 1, 0, 0.9, 0.2)]


def _chunk_minibatches(plan: Plan, chunk: int) -> list[list[int]]:
    return [plan.indices(s, 4) for s in plan.chunk_steps(chunk)]


def test_chunks_split_the_round_order_exactly():
    plan = Plan.for_epochs(7, 10, 4, 2, save_steps=3)
    whole = _chunk_minibatches(Plan.for_epochs(7, 10, 4, 2), chunk=0)
    assert plan.total_steps == 6 and plan.chunks == 2
    parts = _chunk_minibatches(plan, 0) + _chunk_minibatches(plan, 1)
    assert parts == whole and [len(b) for b in whole] == [4, 4, 2, 4, 4, 2]
    assert sorted(i for b in whole[:3] for i in b) == list(range(10))  # one epoch = a permutation
    assert _chunk_minibatches(Plan.for_epochs(8, 10, 4, 2, save_steps=3), 0) != parts[:3]  # the seed matters


def test_train_config_refuses_bad_values():
    with pytest.raises(ConfigError, match="'ckpt.save_steps': expected an integer >= 1, or -1"):
        load_config(LoopConfig, sets=["ckpt.save_steps=0"])
    with pytest.raises(ConfigError, match="'train.batch_size': expected a multiple of "
                                          "micro_batch_size=3, got 4"):
        load_config(LoopConfig, sets=["train.batch_size=4", "train.micro_batch_size=3"])
    assert Plan.for_epochs(0, 0, 8, 1).chunks == 0
