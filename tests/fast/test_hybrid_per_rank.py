"""OpenRLHF's hybrid engine on every actor GPU, planned and sharded without Ray or a GPU:
one engine per rank where engines = actor workers (tensor parallel 1), each rank sampling a
contiguous shard that together cover the batch once; and the colocated host builds its
engine before any model (so vLLM gets its gpu_memory_utilization share)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from alignflow.flows.config import load_config
from alignflow.flows.loader import load_flow
from alignflow.tasks.distributed import group
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.sites import engine_sites
from alignflow.tasks.steps import host_engine
from alignflow.tasks.steps.host import ModelHost

HYBRID = ["train.colocate_all=true", "rollout.engine=vllm", "rollout.max_new_tokens=64",
          "algo.kl.init_coef=0.01", "actor.num_gpus_per_node=2", "ref.num_gpus_per_node=2"]


@pytest.fixture(autouse=True)
def no_vllm_here(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    monkeypatch.setattr(rules, "vllm_openmp_loaded", lambda: False)


def _plan(*sets: str):
    return load_config(load_flow("grpo")[1], sets=[*HYBRID, *sets]).run_plan(
        Cluster.parse("1x8"))


def test_one_engine_per_actor_gpu_is_one_per_rank():
    plan = _plan("vllm.num_engines=2")
    (host,) = plan.hosts
    assert host.engine.in_host and host.engine.per_rank and plan.engines is None
    assert [(s.host, s.ranks) for s in engine_sites(plan)] == [("models", (0,)),
                                                                 ("models", (1,))]
    plan.check_runnable()
    one = _plan("vllm.num_engines=1")  # one engine for two ranks: rank 0's samples all
    assert one.hosts[0].engine.in_host and not one.hosts[0].engine.per_rank
    assert [s.ranks for s in engine_sites(one)] == [(0,)]


@pytest.mark.parametrize(("n", "size"), [(10, 3), (8, 2), (2, 4), (0, 2)])
def test_rank_shards_cover_the_batch_once_in_order(monkeypatch, n, size):
    host = SimpleNamespace(spec=SimpleNamespace(plan=SimpleNamespace(
        engine=SimpleNamespace(per_rank=True))))
    shards = []
    for rank in range(size):
        monkeypatch.setattr(group, "rank_and_size", lambda rank=rank: (rank, size))
        shards.append(host_engine.shard(host, n))
    assert [i for lo, hi in shards for i in range(lo, hi)] == list(range(n))
    assert max(hi - lo for lo, hi in shards) - min(hi - lo for lo, hi in shards) <= 1
    host.spec.plan.engine.per_rank = False  # rank 0's engine samples everything
    assert host_engine.shard(host, n) == (0, n)


def test_the_colocated_host_builds_its_engine_before_any_model():
    order: list[str] = []

    class Fake:
        spec = SimpleNamespace(plan=SimpleNamespace(engine=object(),
                                                    roles=("actor", "ref", "reward")))
        drives_engine = True

        def has(self, role):
            return role in self.spec.plan.roles

        def __getattr__(self, name):
            order.append(name)
            return name

    ModelHost.preload(Fake())
    assert order == ["device", "tokenizer", "engine", "actor", "ref", "reward"]
