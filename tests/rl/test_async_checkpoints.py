"""Asynchronous GRPO with checkpoints written in the background: the generator worker loads
each new policy from the learner's checkpoint, so it must never be handed one that is still
being written (the learn task returns before its checkpoint is durable)."""

from __future__ import annotations

import time

import pytest

from alignflow.tasks.trainers.torch_trainer import TorchTrainer
from tests.rl.test_async import _run, _same, _weights

pytestmark = pytest.mark.slow


def test_generator_waits_for_a_slow_checkpoint(rl_sets, tmp_path, monkeypatch):
    sets = [*rl_sets, "train.max_iterations=3", "async.max_staleness=1"]
    _run(sets, tmp_path, "quick")
    snapshot = TorchTrainer.snapshot

    def slow_snapshot(self, *, extra=None):
        write = snapshot(self, extra=extra)

        def slow_write(store, rel_dir):
            time.sleep(1.0)  # the write is still running when the next batch is generated
            return write(store, rel_dir)
        return slow_write

    monkeypatch.setattr(TorchTrainer, "snapshot", slow_snapshot)
    _run(sets, tmp_path, "slow")
    assert _same(_weights(tmp_path, "quick"), _weights(tmp_path, "slow"))
