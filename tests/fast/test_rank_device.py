"""Each rank's GPU is decided once and made CUDA's current device (issue 21 §3.11): a Ray
actor uses the GPU Ray gave it (also a fraction), torchrun's ranks their LOCAL_RANK (all of
the node's GPUs are visible to each), inline hosts the GPU the plan gives them — checked
with CUDA faked (no GPU here)."""

from __future__ import annotations

import pytest
import torch

from alignflow.flows.config import load_config
from alignflow.flows.rl.config import PPOConfig
from alignflow.tasks.modeling import device
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster


@pytest.fixture
def cuda(monkeypatch) -> list[int]:
    """Four fake CUDA devices; returns the indices `set_device` was called with."""
    chosen: list[int] = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    return chosen


def test_a_torchrun_rank_takes_its_local_rank(cuda, monkeypatch):
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert device.host_device(1) == torch.device("cuda", 2)
    assert cuda == [2]


def test_a_ray_actor_takes_the_gpu_ray_narrowed_it_to(cuda, monkeypatch):
    class Context:
        def get_actor_id(self):
            return "actor"

    class Ray:
        is_initialized = staticmethod(lambda: True)
        get_runtime_context = staticmethod(Context)
        get_gpu_ids = staticmethod(lambda: [3])

    monkeypatch.setitem(__import__("sys").modules, "ray", Ray)
    monkeypatch.setenv("LOCAL_RANK", "1")  # a group's rank: Ray's narrowing still decides
    assert device.host_device(0.25) == torch.device("cuda", 0) and cuda == [0]
    monkeypatch.setenv("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES", "1")
    assert device.host_device(1) == torch.device("cuda", 3)


def test_inline_hosts_take_the_gpus_their_plan_gives_them(cuda, monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    plan = load_config(PPOConfig, sets=["train.colocate_all=false", "reward.sources=rule:t:e", "algo.kl.init_coef=0"]
                       ).run_plan(Cluster(gpus_per_node=4, cpus_per_node=8))
    firsts = {h.name: (h.gpus_per_worker, h.first_gpu) for h in plan.hosts}
    assert firsts == {"actor": (1.0, 0), "critic": (1.0, 1), "reward": (0.0, 2)}
    assert device.host_device(1, first_gpu=1) == torch.device("cuda", 1)
    assert cuda == []  # several hosts share the process: the current device is left alone
