"""gc: exactly the files no committed manifest accounts for are orphans."""

from __future__ import annotations

from alignflow.artifacts import commit, write_table
from alignflow.artifacts.cli import configure
from alignflow.artifacts.cli import run as gc_run
from alignflow.artifacts.gc import find_orphans

_METRIC = {"task_key": ["t"], "step": [1], "key": ["k"]}


def _populate(store) -> tuple[set[str], set[str]]:
    kept_ref = write_table(store, "metrics", _METRIC, run_id="r", task="a", partition={"iter": 1})
    lost_ref = write_table(store, "metrics", _METRIC, run_id="r", task="b", partition={"iter": 1})
    for rel in ["runs/r/run.json", "runs/r/lease.json", "runs/r/logs/a.log",
                "runs/r/logger.json", "runs/r/control.json", "runs/r/progress/0000.log",
                "runs/r/events/go.json", "runs/r/checkpoints/p1/model.safetensors",
                "runs/r/checkpoints/p2/model.safetensors", "runs/r/tasks/.a.json.x.tmp",
                "runs/r/metrics/iter=1/.b-x.parquet.tmp"]:
        store.write_bytes(rel, b"12345")
    commit(store, "r", "iter-1/a", {"artifacts": [kept_ref],
                                    "checkpoint": "runs/r/checkpoints/p1"})
    orphans = {lost_ref.path, "runs/r/checkpoints/p2/model.safetensors",
               "runs/r/tasks/.a.json.x.tmp", "runs/r/metrics/iter=1/.b-x.parquet.tmp"}
    return orphans, set(store.list("runs")) - orphans


def test_find_orphans(fast_store):
    orphans, kept = _populate(fast_store)
    assert {o.path for o in find_orphans(fast_store)} == orphans
    assert {o.path for o in find_orphans(fast_store, "r")} == orphans
    assert find_orphans(fast_store, min_age_s=3600) == []  # all too young to touch
    assert "runs/r/tasks/iter-1/a.json" in kept


def test_cli_dry_run_then_delete(local_store, capsys):
    import argparse

    orphans, kept = _populate(local_store)
    parser = argparse.ArgumentParser()
    configure("gc", parser)
    assert gc_run("gc", parser.parse_args(["--store", local_store.url])) == 0
    out = capsys.readouterr().out
    assert f"{len(orphans)} orphan(s)" in out and "dry run" in out
    assert set(local_store.list("runs")) == orphans | kept
    assert gc_run("gc", parser.parse_args(["--store", local_store.url, "--delete"])) == 0
    assert f"deleted {len(orphans)} orphan(s)" in capsys.readouterr().out
    assert set(local_store.list("runs")) == kept
