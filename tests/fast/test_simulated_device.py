"""A process on a simulated node (`tasks/simulate/node.py`, the device helper): with a fake
GPU it takes the GPU branch for placement and groups and keeps its tensors on the CPU; a
tensor the device helper places on the fake GPU counts as on it for the strict (NCCL)
group, an unplaced CPU tensor is refused as NCCL refuses it; each process records what it
saw. No Ray (the environment Ray would set is set by hand)."""

from __future__ import annotations

import json

import pytest
import torch

from alignflow.tasks.distributed import group
from alignflow.tasks.modeling import device
from alignflow.tasks.simulate import node, sightings
from alignflow.tasks.simulate.cluster import STRICT_GROUPS_ENV, SimulatedCluster, default_cpus
from tests.fixtures.ranks import run_ranks, strict_world


@pytest.fixture
def fake_gpu(monkeypatch, tmp_path):
    """This process as Ray starts it on simulated node 1 with fake GPU 3."""
    monkeypatch.setenv(node.ENV_NODE, "1")
    monkeypatch.setenv(node.ENV_DIR, str(tmp_path))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    monkeypatch.setattr(sightings, "_SEEN", set())
    return tmp_path


def test_off_a_simulated_node_nothing_is_fake(monkeypatch):
    monkeypatch.delenv(node.ENV_NODE, raising=False)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    assert node.index() is None and node.fake_gpus() == [] and not node.simulated_gpu()
    t = node.place(torch.zeros(2))
    assert node.device_of(t) == torch.device("cpu")
    assert device.host_device(0) == torch.device("cpu")


def test_a_fake_gpu_takes_the_gpu_branch_and_keeps_tensors_on_the_cpu(fake_gpu):
    assert node.simulated_gpu() and node.gpu_process()
    assert (node.believed_device(), node.physical_device()) == ("cuda:0", "cuda:3")
    assert device.host_device(1, kind="host models") == torch.device("cpu")
    assert device.on_gpu(1) and not device.on_gpu(0)
    assert device.rank_device() == torch.device("cpu")
    assert group.default_backend() == group.GPU_BACKEND  # a GPU group, strict under sim
    placed = device.place(torch.zeros(2), device.rank_device())
    assert placed.device.type == "cpu" and node.device_of(placed) == torch.device("cuda:3")
    (seen,) = sightings.collect(fake_gpu)
    assert (seen["kind"], seen["node"], seen["cuda_visible_devices"], seen["device"],
            seen["gpu"]) == ("host models", 1, "3", "cuda:0", "cuda:3")


def test_a_cpu_host_on_a_simulated_node_says_so(fake_gpu, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # Ray gave it no GPU
    assert not node.simulated_gpu() and device.host_device(0, kind="host reward").type == "cpu"
    assert json.loads(next((fake_gpu / "sightings").glob("*.json")).read_text())["device"] == \
        "cpu"


def _nccl_only(rank: int, world: int, port: int) -> dict:
    import os

    import torch.distributed as dist

    os.environ.update({node.ENV_NODE: "0", "CUDA_VISIBLE_DEVICES": str(rank)})
    strict_world(rank, world, port, "nccl")  # ranks on cuda:0 and cuda:1 of node-0
    out = {}
    placed = device.place(torch.full((2,), float(rank + 1)), device.rank_device())
    dist.all_reduce(placed)
    out["placed"] = placed.tolist()
    try:
        dist.all_reduce(torch.ones(1))  # a CPU tensor nobody placed: NCCL refuses it
        out["unplaced"] = "carried"
    except RuntimeError as exc:
        out["unplaced"] = str(exc)
    return out


def test_the_strict_group_judges_placed_tensors_as_on_the_fake_gpu():
    for result in run_ranks(_nccl_only, 2):
        assert result["placed"] == [3.0, 3.0]
        assert result["unplaced"].startswith("No backend type associated with device type cpu")


def test_a_simulated_cluster_switches_strict_groups_on_for_its_nodes():
    from alignflow.tasks.distributed import strict

    assert STRICT_GROUPS_ENV == strict.ENV
    sim = SimulatedCluster(2, 4, folder="/tmp/unused")
    args = sim._node_args(1)
    assert args["env_vars"] == {node.ENV_NODE: "1", node.ENV_DIR: "/tmp/unused",
                                STRICT_GROUPS_ENV: "1"}
    assert (args["num_gpus"], args["num_cpus"], args["labels"]) == (4, default_cpus(4),
                                                                    {node.LABEL: "1"})
    assert default_cpus(8) == 20 and default_cpus(1) == 8
