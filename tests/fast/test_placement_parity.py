"""For each flag set of `openrlhf_layouts.CASES` (every colocation flag alone and combined,
PPO with critic and reward model, remote rewards, separate and hybrid engines, 1×8 and 2×8),
alignflow's plan gives every role the GPUs OpenRLHF's launcher gives it, shares GPUs
between the same roles, and has the same engines in the same places. No Ray, no GPU."""

from __future__ import annotations

import pytest

from alignflow.flows.config import load_config
from alignflow.flows.loader import load_flow
from alignflow.tasks.plan import rules
from alignflow.tasks.plan.cluster import Cluster
from tests.fast.openrlhf_layouts import CASES, Case, layout

BASE = ["rollout.max_new_tokens=64", "train.batch_size=128", "rollout.batch_size=64"]


@pytest.fixture(autouse=True)
def no_vllm_here(monkeypatch):
    monkeypatch.setattr(rules, "vllm_installed", lambda: False)
    monkeypatch.setattr(rules, "vllm_openmp_loaded", lambda: False)


def _planned(case: Case):
    cfg = load_config(load_flow(case.flow)[1], sets=[*BASE, *case.sets])
    return cfg, cfg.run_plan(Cluster.parse(case.cluster))


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_the_plan_places_roles_and_engines_as_openrlhf(case):
    cfg, plan = _planned(case)
    gpus, shared, engines = layout(plan, cfg.reward.holds_model)
    assert gpus == case.gpus
    assert shared == case.shared
    assert engines == case.engines
    assert plan.gpus == _total(case)


def _total(case: Case) -> int:
    """OpenRLHF's GPUs: every group's once (shared groups counted once), engines of their
    own on top."""
    groups = {frozenset(s) - {"vllm"} for s in case.shared}
    alone = {r for r in case.gpus if not any(r in g for g in groups)}
    own = sum(tp for where, tp, *_ in case.engines if where == "own")
    return sum(case.gpus[r] for r in alone) + sum(max(case.gpus[r] for r in g)
                                                  for g in groups) + own


def test_at_least_twelve_flag_sets_cover_every_colocation_flag():
    assert len(CASES) >= 12
    flags = {"train.colocate_all=true", "train.colocate_actor_ref=true",
             "train.colocate_critic_reward=true"}
    alone = {f for f in flags if any(set(c.sets) & flags == {f} for c in CASES)}
    assert alone == flags and any(set(c.sets) >= flags for c in CASES)
    assert {c.cluster for c in CASES} >= {"1x8", "2x8"}


def test_a_cpu_machine_keeps_every_role_in_one_process_and_says_so():
    case = CASES[0]
    cfg = load_config(load_flow(case.flow)[1], sets=[*BASE, *case.sets[:2]])
    plan = cfg.run_plan(Cluster(cpus_per_node=4))
    assert plan.colocated and [h.name for h in plan.hosts] == ["models"]
    gpu = cfg.run_plan(Cluster.parse("1x8"))
    assert not gpu.colocated and {h.name for h in gpu.hosts} == {"actor", "ref", "critic",
                                                                 "reward"}
    from alignflow.flows.compat.notes import notes
    said = [n for n in notes(cfg, plan) if "train.colocate_all unset" in n]
    assert len(said) == 1 and not [n for n in notes(cfg, gpu) if "colocate_all unset" in n]
