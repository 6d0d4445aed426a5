"""Checkpoints across drivers: a resumed host prunes the first driver's checkpoints too (it
keeps the last ckpt.max_num of the run, not of its own process), and `--rerun-from` a key
whose checkpoint was pruned is refused before anything is deleted, naming the keys that
can be rerun."""

from __future__ import annotations

import pytest

from alignflow.errors import FlowError
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from alignflow.flows.loader import load_flow

pytestmark = pytest.mark.slow


def _actor_checkpoints(store) -> list[str]:
    root = store / "runs" / "r" / "checkpoints"
    return sorted(p.parent.parent.parent.name for p in root.glob("iter-*/learn/actor/meta.json"))


def test_checkpoints_are_pruned_across_drivers_and_rerun_checks_them(rl_sets, tmp_path):
    store = tmp_path / "store"
    flow, cls = load_flow("grpo")
    two = load_config(cls, sets=[*rl_sets, "train.max_iterations=2", "ckpt.max_num=2"])
    api.run(flow, two, store=str(store), run_id="r", executor="inline")
    assert _actor_checkpoints(store) == ["iter-0000", "iter-0001"]
    four = load_config(cls, sets=[*rl_sets, "train.max_iterations=4", "ckpt.max_num=2"])
    api.resume("r", store=str(store), rerun_from="export", executor="inline", config=four)
    assert _actor_checkpoints(store) == ["iter-0002", "iter-0003"]  # ckpt.max_num = 2

    before = sorted(runs.read_manifests(api.open_store(str(store)), "r"))
    with pytest.raises(FlowError) as info:
        api.resume("r", store=str(store), rerun_from="iter-0001/generate", executor="inline")
    assert str(info.value) == (
        "--rerun-from 'iter-0001/generate': worker 'models' would restore the checkpoint of "
        "task 'iter-0000/learn' (runs/r/checkpoints/iter-0000/learn), which is no longer in "
        "the store (a host keeps the last ckpt.max_num checkpoints); the keys from "
        "'iter-0002/sync' on can be rerun; run 'r' is unchanged")
    assert sorted(runs.read_manifests(api.open_store(str(store)), "r")) == before
    api.resume("r", store=str(store), rerun_from="iter-0002/sync", executor="inline")
    assert runs.read_run(api.open_store(str(store)), "r")["status"] == runs.SUCCESSFUL
