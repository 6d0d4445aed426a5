"""Clusters one does not have (`--cluster NxG[:C]`), clusters read from Ray's nodes, and the
fit check: every worker group and engine placed as Ray places them (one bundle per node a
group spans, spread groups on distinct nodes, an engine's tensor-parallel GPUs on one node,
CPUs counted on GPU clusters that state them), OpenRLHF's hybrid engines within their
host's GPUs. No Ray, no GPU."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.rl.config import PPOConfig, RLConfig
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster, of_nodes
from alignflow.tasks.simulate.node import LABEL

ALL = "train.colocate_all=true"  # every role on the actor's GPUs (unset on GPUs: apart)


def plan(spec: str, *sets: str, cls=RLConfig):
    return load_config(cls, sets=list(sets)).run_plan(Cluster.parse(spec))


@pytest.fixture(autouse=True)
def no_vllm_here(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    monkeypatch.setattr(rules, "vllm_openmp_loaded", lambda: False)


def test_a_cluster_spec_parses_and_reads_back():
    c = Cluster.parse("2x8")
    assert (c.nodes, c.gpus_per_node, c.cpus_per_node, c.gpus, c.spec) == (2, 8, None, 16, "2x8")
    assert c.described and not c.simulated and "CPUs not counted" in c.describe()
    assert Cluster.parse(" 1×4:32 ").cpus_per_node == 32
    sim = Cluster.parse("2x4", simulated=True)
    assert sim.simulated and not sim.described and "simulated" in sim.describe()
    for bad in ("8", "2x", "x8", "2x8:", "-1x8", "0x8"):
        with pytest.raises(ConfigError, match=r"expected (NODESxGPUS|nodes >= 1)"):
            Cluster.parse(bad)


def test_ray_nodes_make_a_cluster_leaving_out_a_cpu_only_head():
    nodes = [{"Resources": {"CPU": 4.0}}, {"Resources": {"CPU": 32.0, "GPU": 8.0}},
             {"Resources": {"CPU": 16.0, "GPU": 4.0}}]
    assert of_nodes(nodes) == Cluster(nodes=2, gpus_per_node=4, cpus_per_node=16.0)
    assert of_nodes([{"Resources": {"CPU": 2.0}}]) == Cluster(cpus_per_node=2.0)
    simulated = [{"Resources": {"CPU": 20.0, "GPU": 8.0}, "Labels": {LABEL: str(i)}}
                 for i in range(2)]
    assert of_nodes(simulated) == Cluster(nodes=2, gpus_per_node=8, cpus_per_node=20.0,
                                          simulated=True)
    assert of_nodes([]) is None


def test_a_host_wider_than_a_node_is_refused_naming_the_numbers():
    plan("1x8", ALL, "actor.num_gpus_per_node=8").check_fits()
    with pytest.raises(ConfigError, match=r"asks for 8 GPU\(s\) \(models 1×8 × 1\), which does "
                                          r"not fit 2 node\(s\) × 4 GPU\(s\).*host models needs "
                                          r"a node with 8 GPU\(s\) free"):
        plan("2x4", ALL, "actor.num_gpus_per_node=8").check_fits()


def test_a_group_over_more_nodes_than_the_cluster_has_is_refused():
    plan("4x8", ALL, "actor.num_nodes=4").check_fits()
    with pytest.raises(ConfigError, match="host models spreads over 4 nodes; the cluster has 2"):
        plan("2x8", ALL, "actor.num_nodes=4").check_fits()


def test_more_gpus_than_the_cluster_has_are_refused_with_the_breakdown():
    sets = ("train.colocate_all=false", "actor.num_gpus_per_node=8", "ref.num_gpus_per_node=8",
            "algo.kl.init_coef=0.01", "rollout.engine=vllm", "vllm.num_engines=2")
    plan("3x8", *sets).check_fits()
    with pytest.raises(ConfigError, match=r"asks for 18 GPU\(s\); this cluster has 16 "
                                          r"\(actor 1×8 × 1, ref 1×8 × 1, vLLM engines 2 × 1\)"):
        plan("2x8", *sets).check_fits()


def test_an_engine_keeps_its_tensor_parallel_gpus_on_one_node():
    sets = ("rollout.engine=vllm", "vllm.num_engines=1", "vllm.tensor_parallel_size=4")
    plan("1x8", *sets).check_fits()
    with pytest.raises(ConfigError, match=r"vLLM engine 0 needs a node with 4 GPU\(s\)"):
        plan("2x3", *sets).check_fits()


def test_cpus_count_where_the_cluster_states_them():
    plan("1x8", ALL, "actor.num_gpus_per_node=8", "placement.num_cpus=8").check_fits()
    plan("1x8:64", ALL, "actor.num_gpus_per_node=8", "placement.num_cpus=8").check_fits()
    with pytest.raises(ConfigError, match=r"needs a node with 8 GPU\(s\) and 80 CPU\(s\) free"):
        plan("1x8:64", ALL, "actor.num_gpus_per_node=8", "placement.num_cpus=10").check_fits()


def test_roles_apart_fill_the_nodes_largest_first():
    sets = ("train.colocate_all=false", "critic.num_gpus_per_node=4", "rollout.engine=hf",
            "actor.num_gpus_per_node=4", "algo.kl.init_coef=0.01")
    p = plan("2x5", *sets, cls=PPOConfig)
    assert p.gpus == 4 + 1 + 4 and p.fit_problem() is None  # 4+1 on one node, 4 on the other
    split = plan("2x5", *sets, "ref.num_gpus_per_node=2", cls=PPOConfig)  # 10 GPUs of 10,
    assert "host ref needs a node with 2 GPU(s)" in split.fit_problem()  # but 1 + 1 left


def test_hybrid_engines_share_their_hosts_gpus():
    hybrid = ("train.colocate_all=true", "actor.num_gpus_per_node=8", "rollout.engine=vllm")
    p = plan("1x8", *hybrid, "vllm.num_engines=4", "vllm.tensor_parallel_size=2")
    assert p.engines.hybrid and p.engines.gpus == 0 and p.engines.gpus_used == 8 and p.gpus == 8
    p.check_fits()
    p.check_runnable()  # tensor-parallel hybrid engines: Ray actors on the actor's GPUs
    assert p.engines.transport == "ray"  # no NCCL group of two ranks on one GPU
    one_each = plan("1x8", *hybrid, "vllm.num_engines=8")  # OpenRLHF's tp-1 hybrid engine
    assert one_each.engines is None and one_each.hosts[0].engine.in_host
    one_each.check_runnable()
    with pytest.raises(ConfigError, match=r"need 16 GPU\(s\) of host models, which has 8"):
        plan("2x8", *hybrid, "vllm.num_engines=8", "vllm.tensor_parallel_size=2").check_fits()
    unset = plan("2x8", "actor.num_gpus_per_node=8", "rollout.engine=vllm", "vllm.num_engines=4",
                 "vllm.tensor_parallel_size=2", "algo.kl.init_coef=0")  # colocate_all unset:
    # roles and engines on GPUs of their own (no KL term: no reference model)
    assert not unset.engines.hybrid and unset.gpus == 16 and unset.fit_problem() is None


def test_a_cluster_described_or_simulated_is_planned_with_vllm_on_its_nodes():
    assert plan("1x8").hosts[0].engine.kind == "vllm"  # auto, on a described GPU cluster
    sim = load_config(RLConfig, sets=[]).run_plan(Cluster.parse("1x8", simulated=True))
    assert sim.hosts[0].engine.kind == "vllm" and sim.simulated == "1x8"
    here = load_config(RLConfig, sets=[]).run_plan(Cluster(gpus_per_node=8, cpus_per_node=8))
    assert here.hosts[0].engine.kind == "hf" and here.simulated is None  # not installed here
