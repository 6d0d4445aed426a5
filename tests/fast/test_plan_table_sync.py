"""The dry run's `weight sync:` line names how each engine layout is synced
(`tasks/plan/table.py:sync_line`, `vllm_ipc.planned_mode`): separate engines by their
transport (Ray's object store, an NCCL broadcast), an engine in the trainer's process in
place, per-rank hybrid engines (TP 1) and hybrid engine actors of TP 2 by CUDA IPC handle.
Plans for a cluster this machine is not, without Ray, a GPU or vLLM."""

from __future__ import annotations

import pytest

from alignflow.flows.config import load_config
from alignflow.flows.rl.config import RLConfig
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.table import plan_table

GPUS = Cluster(gpus_per_node=8, cpus_per_node=64)
ACTOR8 = ["train.colocate_all=true", "actor.num_gpus_per_node=8", "rollout.engine=vllm"]


@pytest.fixture(autouse=True)
def vllm_here(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: True)
    monkeypatch.setattr(rules, "vllm_openmp_loaded", lambda: False)


def _sync(*sets: str) -> str:
    plan = load_config(RLConfig, sets=["algo.kl.init_coef=0", "rollout.max_new_tokens=64",
                                       *sets]).run_plan(GPUS)
    (line,) = [x for x in plan_table(plan, "ray") if x.lstrip().startswith("weight sync:")]
    return line.split("weight sync: ", 1)[1]


@pytest.mark.parametrize("sets, mode, says", [
    (("rollout.engine=vllm", "vllm.num_engines=2", "vllm.sync_backend=nccl"), "nccl",
     "broadcast over nccl"),
    (("rollout.engine=vllm", "vllm.num_engines=2", "vllm.sync_with_ray=true"), "ray",
     "Ray's object store"),
    (("rollout.engine=vllm",), "in place", "by reference"),
    (("rollout.engine=hf",), "in place", "HF engine"),
    ((*ACTOR8, "vllm.num_engines=8"), "cuda-ipc", "buckets by handle"),
    ((*ACTOR8, "vllm.num_engines=4", "vllm.tensor_parallel_size=2"), "cuda-ipc",
     "each tensor-parallel worker opens the one of its GPU"),
], ids=["separate-nccl", "separate-ray", "in-process", "hf", "hybrid-tp1", "hybrid-tp2"])
def test_the_sync_line_names_each_layout(sets, mode, says):
    line = _sync(*sets)
    assert line.startswith(f"{mode} (") and says in line, line
