"""The run plan's rules, one test each: hosts and roles, workers, GPUs and CPUs per worker,
trainers, engines, the generator worker, the fit check — made for clusters this machine
is not (`Cluster(...)`), without Ray, a GPU or vLLM."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.loops.config import RejectionSamplingConfig
from alignflow.flows.offline.config import DistillConfig, SFTConfig
from alignflow.flows.rl.config import PPOConfig, RLConfig
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster

CPU, GPUS = Cluster(cpus_per_node=8), Cluster(gpus_per_node=8, cpus_per_node=64)
RM = "tests/fixtures"  # any path that is not a rule, a URL or a .py file: a reward model


def plan(cls=RLConfig, *sets: str, cluster: Cluster = CPU):
    """The plan of `sets` without a KL term (no reference model) and with a response length
    (asynchronous runs need one): the placement rules, not OpenRLHF's defaults, are tested."""
    base = ["algo.kl.init_coef=0", "rollout.max_new_tokens=64"] if issubclass(cls, RLConfig) \
        else []
    return load_config(cls, sets=[*base, *sets]).run_plan(cluster)


@pytest.fixture(autouse=True)
def no_vllm(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    monkeypatch.setattr(rules, "vllm_openmp_loaded", lambda: False)


def test_every_role_shares_one_host_by_default():
    p = plan()
    (host,) = p.hosts
    assert (host.name, host.roles, host.workers, host.gpus_per_worker) == (
        "models", ("actor", "reward"), 1, 0.0)
    assert host.trainer("actor").backend == "torch" and host.engine.describe() == "hf in-process"
    assert p.colocated and p.generator is None and p.engines is None
    assert "(no reference model" in host.label


def test_roles_apart_take_their_own_workers_and_a_rule_reward_takes_no_gpu():
    p = plan(PPOConfig, "train.colocate_all=false", "actor.num_gpus_per_node=2",
             "critic.num_nodes=2", cluster=GPUS)
    assert {h.name: (h.nodes, h.workers_per_node) for h in p.hosts} == {
        "actor": (1, 2), "critic": (2, 1), "reward": (1, 1)}
    assert {h.name: h.gpus_per_worker for h in p.hosts} == {"actor": 1, "critic": 1, "reward": 0}
    assert not p.host("reward").holds_model and p.host_of("critic") == "critic"
    assert p.trainer("actor").world_size == 2 and p.gpus == 4


def test_a_reward_model_holds_a_model_and_gets_a_gpu():
    p = plan(RLConfig, "train.colocate_all=false", f"reward.model_name_or_path={RM}",
             cluster=GPUS)
    assert p.host("reward").holds_model and p.host("reward").gpus_per_worker == 1


def test_gpus_per_worker_as_asked_fractions_included():
    assert plan(RLConfig, "placement.num_gpus=0.5", cluster=GPUS).hosts[0].gpus_per_worker == 0.5
    assert plan(RLConfig, "placement.num_cpus=3").hosts[0].cpus_per_worker == 3


def test_deepspeed_and_lora_per_trained_role():
    p = plan(PPOConfig, "ds.zero_stage=3", "ds.lora.rank=8")
    actor, critic = p.trainer("actor"), p.trainer("critic")
    assert actor.describe() == "deepspeed zero-3 lora r8"
    assert critic.describe() == "deepspeed zero-3"  # a value model takes no adapters
    assert actor.for_steps(40).total_steps == 40 and actor.config.total_steps == 1


def test_vllm_in_the_hosts_process_when_colocated_on_a_gpu(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: True)
    engine = plan(RLConfig, cluster=GPUS).hosts[0].engine  # auto: vLLM on GPUs
    assert (engine.kind, engine.in_host, engine.vllm.colocated) == ("vllm", True, True)
    assert plan(RLConfig).hosts[0].engine.kind == "hf"  # auto on CPU, no engines asked


def test_vllm_engines_are_placed_once_for_the_run():
    p = plan(RLConfig, "rollout.engine=vllm", "vllm.num_engines=2",
             "vllm.tensor_parallel_size=2", cluster=GPUS)
    e = p.engines
    assert (e.host, e.count, e.tensor_parallel, e.gpus_each, e.transport) == (
        "actor", 2, 2, 2.0, "nccl")  # roles apart on GPUs (OpenRLHF)
    assert not p.hosts[0].engine.in_host and p.gpus == 1 + 4 and p.gpus_per_node == 5
    assert plan(RLConfig, "rollout.engine=vllm", "vllm.num_engines=2").engines.transport == "gloo"


def test_the_generator_worker_takes_the_engine_and_a_gpu():
    sets = ("async.max_staleness=1",)
    p = plan(RLConfig, *sets, cluster=GPUS)
    assert p.generator.name == "rollout" and p.generator.gpus_per_worker == 1
    assert p.hosts[0].engine is None and p.generation is p.generator.engine
    driving = plan(RLConfig, *sets, "rollout.engine=vllm", "vllm.num_engines=2", cluster=GPUS)
    assert driving.generator.gpus_per_worker == 0 and driving.engines.host == "rollout"


def test_offline_hosts_take_gpus_only_when_asked():
    p = plan(DistillConfig, "teacher.model_name_or_path=x", "placement.num_gpus_per_node=2",
             cluster=GPUS)
    assert [(h.name, h.roles, h.workers, h.gpus_per_worker) for h in p.hosts] == [
        ("policy", ("model",), 2, 0.0), ("teacher", ("teacher",), 1, 0.0)]
    assert plan(SFTConfig, "placement.num_gpus=1", cluster=GPUS).hosts[0].gpus_per_worker == 1


def test_the_loops_host_knows_its_schedule():
    cfg = load_config(RejectionSamplingConfig, sets=["num_cpus=2"])
    (host,) = cfg.run_plan(CPU).hosts
    assert host.roles == ("actor", "reward") and host.cpus_per_worker == 2
    assert host.trainer("actor").config == cfg.trainer()


def test_a_plan_the_cluster_cannot_hold_is_refused_in_one_line():
    plan(RLConfig, "actor.num_gpus_per_node=8", cluster=GPUS).check_fits()
    with pytest.raises(ConfigError, match=r"the placement of actor, reward asks for 16 GPU\(s\); "
                                          r"this cluster has 8"):
        plan(RLConfig, "actor.num_nodes=2", "actor.num_gpus_per_node=8",
             cluster=GPUS).check_fits()


@pytest.mark.parametrize(("sets", "cluster", "executor", "why"), [
    ((), CPU, "inline", "one process is enough"),
    ((), GPUS, "ray", "GPUs"),
    (("async.max_staleness=1",), CPU, "ray", "worker of its own"),
    (("ds.zero_stage=2",), CPU, "ray", "DeepSpeed"),
    (("actor.num_nodes=2",), CPU, "ray", "2 workers per role"),
    (("placement.num_gpus=1",), CPU, "ray", "placement.num_gpus"),
    (("train.colocate_actor_ref=true",), CPU, "ray", "separate hosts"),
    (("rollout.engine=vllm",), CPU, "ray", "vLLM"),
    (("ref.num_gpus_per_node=2",), CPU, "inline", "one process"),  # no ref: no KL term
])
def test_the_executor_each_rule_asks_for(sets, cluster, executor, why):
    p = plan(RLConfig, *sets, cluster=cluster)
    assert p.executor == executor and why in p.executor_reason, p.executor_reason


def test_distillation_and_the_loops_fit_one_process():
    assert plan(DistillConfig, "teacher.model_name_or_path=x").executor == "inline"
    assert plan(RejectionSamplingConfig).executor == "inline"


def test_only_hosts_without_trainer_or_engine_are_immutable():
    """An immutable host is taken over as it is by the next driver of a supervised run
    (`worker_group(immutable=)`); a host that trains or holds an engine changes."""
    p = plan(PPOConfig, "train.colocate_all=false", f"reward.model_name_or_path={RM}",
             "algo.kl.init_coef=0.01", cluster=GPUS)
    assert {h.name: h.immutable for h in p.hosts} == {
        "actor": False, "critic": False, "ref": True, "reward": True}
    assert not plan(RLConfig).hosts[0].immutable  # one colocated host trains
    assert not plan(RLConfig, "async.max_staleness=1", cluster=GPUS).generator.immutable
    distill = plan(DistillConfig, "teacher.model_name_or_path=x").hosts
    assert [(h.name, h.immutable) for h in distill] == [("policy", False), ("teacher", True)]
