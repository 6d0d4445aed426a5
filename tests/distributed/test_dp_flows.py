"""Data-parallel roles through the flows, on Ray: the actor of a GRPO run and the policy of a
DPO run as groups of 2 workers equal 1 worker on the whole batch; SIGKILL of one rank in the
middle of a learn step rebuilds the group from the last checkpoint and ends bitwise equal to
a run never killed."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest
import torch
from safetensors.torch import load_file

from alignflow.catalog.catalog import Catalog
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests.offline.conftest import run_flow

pytestmark = pytest.mark.slow
TWO = ["placement.num_cpus=0.5"]  # 2 workers fit the 2-CPU test cluster beside a Ray task


@pytest.fixture(scope="module")
def grpo_sets(rl_sets) -> list[str]:
    return [*rl_sets, "train.max_iterations=2", "train.max_epochs=4"]


def _weights(store, run_id: str, folder: str = "actor") -> dict[str, torch.Tensor]:
    return load_file(store / "runs" / run_id / "final" / folder / "model.safetensors")


def _learn_metrics(store, run_id: str) -> dict[str, float]:
    with Catalog(str(store)) as cat:
        rows = cat.sql("SELECT key, value FROM metrics WHERE run_id = ? AND iter = 1 AND key IN "
                       "('train/policy_loss', 'train/clip_frac', 'train/grad_norm', "
                       "'train/approx_kl')", [run_id]).to_pylist()
    return {r["key"].removeprefix("train/").replace("policy_loss", "loss"): r["value"]
            for r in rows}


def _grpo(sets, store, run_id, executor="ray"):
    from tests.rl.test_rl_flows import _run

    return _run("grpo", sets, store, executor=executor, seed=5, run_id=run_id)


@pytest.fixture(scope="module")
def grpo_runs(ray_local, grpo_sets, tmp_path_factory):
    """One worker (inline) and two workers (Ray) on the same GRPO run; PyTorch trainer."""
    store = tmp_path_factory.mktemp("dp-grpo")
    _grpo(grpo_sets, store, "one", executor="inline")
    _grpo([*grpo_sets, *TWO, "actor.num_gpus_per_node=2"], store, "two")
    return store


def test_two_actor_workers_equal_one(grpo_runs):
    one, two = _weights(grpo_runs, "one"), _weights(grpo_runs, "two")
    init = load_file(grpo_runs / "runs/one/checkpoints/iter-0000/learn/actor/model.safetensors")
    assert any(not torch.equal(v, one[k]) for k, v in init.items() if k in one)  # it learned
    for name, p in one.items():
        torch.testing.assert_close(two[name], p, atol=2e-5, rtol=0, msg=name)
    a, b = _learn_metrics(grpo_runs, "one"), _learn_metrics(grpo_runs, "two")
    assert a.keys() == b.keys() and len(a) >= 3
    for key, value in a.items():
        assert b[key] == pytest.approx(value, rel=1e-4, abs=1e-6), key
    manifest = api.open_store(str(grpo_runs)).read_json("runs/two/tasks/iter-0001/learn.json")
    assert manifest["attempts"] == 1 and manifest["worker"] == "models"


def _rank_pid(run_id: str, rank: int) -> int:
    import ray

    return ray.get(ray.get_actor(f"alignflow:{run_id}:models:{rank}").pid.remote())


def _wait_for(path, thread, what: str, timeout: float = 600) -> None:
    deadline = time.time() + timeout
    while not (path.exists() and any(path.iterdir())):
        assert thread.is_alive(), f"the run ended before {what}"
        assert time.time() < deadline, f"{what} never happened"
        time.sleep(0.005)


def test_sigkill_of_one_rank_mid_learn_rebuilds_the_group(grpo_runs, grpo_sets):
    store, errors = grpo_runs, []
    sets = [*grpo_sets, *TWO, "actor.num_gpus_per_node=2"]

    def run() -> None:
        try:
            _grpo(sets, store, "killed")
        except BaseException as exc:  # reported by the assert below
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    _wait_for(store / "runs/killed/rollouts/iter=1", thread, "iteration 1's rollouts")
    pid = _rank_pid("killed", 1)
    _wait_for(store / "runs/killed/rollout_advantages/iter=1", thread, "iteration 1's learn")
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=900)
    assert not thread.is_alive() and not errors, errors
    manifests = runs.read_manifests(api.open_store(str(store)), "killed")
    assert max(m["attempts"] for k, m in manifests.items() if k.startswith("iter-0001")) >= 2
    killed, straight = _weights(store, "killed"), _weights(store, "two")
    for name, p in straight.items():
        assert torch.equal(killed[name], p), name


def test_two_dpo_workers_under_zero3_equal_one(ray_local, base_sets, pairs_file, tmp_path):
    pytest.importorskip("deepspeed")
    sets = [*base_sets, f"data.dataset={pairs_file}", "train.max_steps=4", "adam.lr=1e-3",
            "ds.zero_stage=3", "data.apply_chat_template=false"]
    run_flow("dpo", sets, tmp_path, run_id="one", seed=2)
    run_flow("dpo", [*sets, *TWO, "placement.num_gpus_per_node=2"], tmp_path, run_id="two",
             seed=2, executor="ray")
    assert (tmp_path / "runs/two/checkpoints/train-0000/ranks/rank-00001").is_dir()
    one, two = _weights(tmp_path, "one", "model"), _weights(tmp_path, "two", "model")
    for name, p in one.items():
        torch.testing.assert_close(two[name], p, atol=1e-5, rtol=0, msg=name)
    with Catalog(str(tmp_path)) as cat:
        rows = {r["run_id"]: r for r in cat.sql(
            "SELECT run_id, count(*) AS n, sum(loss) AS loss, sum(margin) AS margin "
            "FROM preferences GROUP BY run_id").to_pylist()}
    assert rows["one"]["n"] == rows["two"]["n"] == 4 * 8  # every consumed pair, once
    assert rows["two"]["loss"] == pytest.approx(rows["one"]["loss"], rel=1e-5)
    assert rows["two"]["margin"] == pytest.approx(rows["one"]["margin"], rel=1e-4, abs=1e-6)
