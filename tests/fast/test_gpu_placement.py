"""What a GPU cluster run reserves, end to end from the config to `worker_group` (issue 21
§3.2, §3.7): a host without a model (rule rewards) takes no GPU, the generator worker takes
one for its engine, every vLLM engine's GPUs are counted, and a plan that Ray could not
place (an engine wider than a node, more workers on a node than it has GPUs, data-parallel
ranks sharing a GPU) is refused in one line before anything starts."""

from __future__ import annotations

import pytest

from alignflow.errors import ConfigError
from alignflow.flows.config import load_config
from alignflow.flows.ray import workers
from alignflow.flows.rl import steps
from alignflow.flows.rl.config import RLConfig
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster

GPUS = Cluster(gpus_per_node=8, cpus_per_node=64)
RULES = "reward.sources=rule:target:e"
BUDGET = "rollout.max_new_tokens=32"  # asynchronous generation needs a fixed budget


@pytest.fixture(autouse=True)
def no_vllm(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    monkeypatch.setattr(rules, "vllm_openmp_loaded", lambda: False)


@pytest.fixture
def declared(monkeypatch) -> dict[str, dict]:
    """What each host asks `worker_group` for (name -> resources per worker)."""
    found: dict[str, dict] = {}

    def worker_group(name, factory, **kw):
        found[name] = kw
        return name
    monkeypatch.setattr(workers, "worker_group", worker_group)  # what `plan_group` calls
    return found


def _plan(*sets: str, cluster: Cluster = GPUS):
    cfg = load_config(RLConfig, sets=list(sets))
    return cfg, cfg.run_plan(cluster)


def test_a_rule_reward_host_takes_no_gpu_and_the_actor_host_one(declared):
    cfg, plan = _plan("train.colocate_all=false", RULES)
    steps.declare_hosts(cfg, plan, iterations=2)
    # OpenRLHF's default KL term (0.01) adds a reference model: a host of its own, with a GPU
    assert {n: kw["num_gpus"] for n, kw in declared.items()} == {"actor": 1.0, "ref": 1.0,
                                                                 "reward": 0.0}


def test_the_generator_worker_gets_a_gpu_for_its_engine(declared):
    cfg, plan = _plan("async.max_staleness=1", RULES, BUDGET)
    steps.declare_generator(cfg, plan)
    assert declared["rollout"]["num_gpus"] == 1.0


def test_a_generator_that_drives_engine_actors_leaves_them_the_gpus(declared, monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: True)
    cfg, plan = _plan("async.max_staleness=1", "rollout.engine=vllm", "vllm.num_engines=2",
                      "vllm.tensor_parallel_size=2", RULES, BUDGET)
    steps.declare_generator(cfg, plan)
    assert declared["rollout"]["num_gpus"] == 0.0 and plan.gpus == 1 + 1 + 4  # actor, ref


def test_engine_gpus_count_toward_the_fit():
    _, plan = _plan("rollout.engine=vllm", "vllm.num_engines=4", "vllm.tensor_parallel_size=2",
                    "actor.num_gpus_per_node=2")
    with pytest.raises(ConfigError, match=r"asks for 11 GPU\(s\); this cluster has 8"):
        plan.check_fits()


@pytest.mark.parametrize(("sets", "match"), [
    (("rollout.engine=vllm", "vllm.num_engines=1", "vllm.tensor_parallel_size=8"),
     "vLLM engine 0 needs a node with 8 GPU\\(s\\)"),
    (("actor.num_gpus_per_node=8",), "host actor needs a node with 8 GPU\\(s\\)"),
    (("actor.num_gpus_per_node=2", "placement.num_gpus=0.5"),
     "2 data-parallel workers at 0.5 GPU each would share GPUs"),
])
def test_a_plan_ray_cannot_place_is_refused_in_one_line(sets, match):
    _, plan = _plan(*sets, cluster=Cluster(nodes=4, gpus_per_node=4, cpus_per_node=64))
    with pytest.raises(ConfigError, match=match) as err:
        plan.check_fits()
    assert "\n" not in str(err.value) and "4 node(s) × 4 GPU(s)" in str(err.value)
