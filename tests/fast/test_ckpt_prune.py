"""Pruning old checkpoints (`artifacts/ckpt_index.prune`, both hosts' `ckpt.max_num`):
the oldest go until `keep` (at least 2) remain, and one already gone — pruned first by a
replaced worker or one adopted from a dead driver — is passed over, not a failed task (a
chaos run failed on `FileNotFoundError: 'actor'`)."""

from __future__ import annotations

from alignflow.artifacts.ckpt_index import prune


def _saved(store, count: int) -> list[str]:
    for i in range(count):
        store.write_json(f"runs/r/ckpt-{i}/actor/meta.json", {"step": i})
    return [f"runs/r/ckpt-{i}/actor" for i in range(count)]


def test_the_oldest_go_until_keep_remain_and_never_fewer_than_two(local_store):
    saved = _saved(local_store, 5)
    prune(local_store, saved, 3)
    assert saved == ["runs/r/ckpt-2/actor", "runs/r/ckpt-3/actor", "runs/r/ckpt-4/actor"]
    assert not local_store.exists("runs/r/ckpt-1/actor/meta.json")
    prune(local_store, saved, 1)
    assert saved == ["runs/r/ckpt-3/actor", "runs/r/ckpt-4/actor"]


def test_a_checkpoint_another_worker_pruned_first_is_passed_over(local_store):
    saved = _saved(local_store, 4)
    local_store.delete("runs/r/ckpt-0", recursive=True)  # the other worker was faster
    local_store.delete("runs/r/ckpt-1/actor", recursive=True)
    prune(local_store, saved, 2)
    assert saved == ["runs/r/ckpt-2/actor", "runs/r/ckpt-3/actor"]
