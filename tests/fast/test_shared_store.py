"""A run over several nodes needs a store every node shares (issue 21 §3.15): a local path
is refused in one line — by `--dry-run` and when the run starts, from the run's plan —
unless it lies on a network filesystem or the user declares it shared."""

from __future__ import annotations

import pytest

from alignflow.artifacts import shared
from alignflow.artifacts.store import Store
from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.control import planning
from alignflow.flows.journal.runs import RunState
from alignflow.flows.rl.config import RLConfig
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster

TWO_NODES = Cluster(nodes=2, gpus_per_node=8, cpus_per_node=64)


@pytest.fixture
def plan(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    monkeypatch.delenv(shared.ENV, raising=False)
    return lambda cluster=TWO_NODES: load_config(RLConfig, sets=[]).run_plan(cluster)


def test_a_local_store_on_a_multi_node_run_is_refused_in_one_line(plan, tmp_path):
    store = Store.open(str(tmp_path / "store"))
    with pytest.raises(ConfigError, match="spans a cluster of 2 nodes, but its store") as err:
        planning.check_store(plan(), store)
    assert "\n" not in str(err.value) and "ALIGNFLOW_SHARED_STORE=1" in str(err.value)
    assert not (tmp_path / "store").exists()  # nothing written
    planning.check_store(plan(Cluster(gpus_per_node=8)), store)  # one node: fine


def test_object_stores_and_declared_or_network_paths_are_shared(plan, tmp_path, monkeypatch):
    planning.check_store(plan(), Store.open("s3://bucket/runs"))
    with pytest.raises(ConfigError):
        planning.check_store(plan(), Store.open("memory://one-process"))
    monkeypatch.setenv(shared.ENV, "1")
    planning.check_store(plan(), Store.open(str(tmp_path)))


def test_a_path_on_a_network_filesystem_counts_as_shared(tmp_path):
    mounts = tmp_path / "mounts"
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nserver:/export {tmp_path}/nfs nfs4 rw 0 0\n")
    assert shared.network_filesystem(str(tmp_path / "nfs" / "store"), str(mounts)) == "nfs4"
    assert shared.network_filesystem(str(tmp_path / "local"), str(mounts)) is None


def test_the_run_start_refuses_it_before_recording_anything(plan, tmp_path, monkeypatch):
    config, two_nodes = load_config(RLConfig, sets=[]), plan()
    monkeypatch.setattr(type(config), "run_plan", lambda self, cluster=None: two_nodes)
    store = Store.open(str(tmp_path))
    with pytest.raises(ConfigError, match="spans a cluster of 2 nodes"):
        planning.settle(RunState(store, "r", {"run_id": "r"}, {}), config)
