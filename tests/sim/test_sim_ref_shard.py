"""The reference model sharded like the actor on a simulated cluster (issue 42): GRPO with
a KL term, the actor under DeepSpeed ZeRO-3 on two ranks of a simulated 1×2 cluster, so the
host holds its reference as a ZeRO-3 eval engine (`tasks/trainers/deepspeed/frozen.py`)
whose every forward gathers over the NCCL-strict group. Its first iteration's reference
log-probs (same weights, same samples) equal a single process's whole replica within the
float32 bound of one network output computed two ways (`tests/tolerance.py`)."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoConfig

from alignflow.catalog.catalog import Catalog
from tests.sim.checks import gpus_of, planned, recorded_plan
from tests.tolerance import network_bound

pytestmark = pytest.mark.slow


def _reference(store, run_id: str) -> list[tuple]:
    with Catalog(str(store)) as cat:
        rows = cat.sql("SELECT r.prompt_id, r.sample_idx, o.response_ids, r.ref_logprobs "
                       "FROM rollout_reference r JOIN rollouts o USING (run_id, iteration, "
                       "prompt_id, sample_idx) WHERE r.run_id = ? AND r.iteration = 0 "
                       "ORDER BY 1, 2", [run_id]).to_pylist()
    return [tuple(r.values()) for r in rows]


def test_zero3_reference_on_two_simulated_ranks_equals_the_replica(
        simulated, sim_store, baselines, grpo_sets, tiny_model_dir):
    pytest.importorskip("deepspeed")
    base = [*grpo_sets, "rollout.engine=hf", "train.max_iterations=1"]
    sets = [*base, "train.colocate_all=true", "actor.num_gpus_per_node=2", "ds.zero_stage=3"]
    res = simulated.use("1x2").run("grpo", sets, sim_store, "ref-zero3")
    assert res["error"] is None, res["error"]
    plan, record = recorded_plan(sim_store, "ref-zero3")
    assert plan == planned("grpo", sets, "1x2") and record["cluster"] == "1x2"
    (host,) = plan.hosts
    assert "ref" in host.roles and host.workers == 2
    assert plan.trainer("actor").describe() == "deepspeed zero-3"
    assert len(gpus_of(res["sightings"])["host models"]) == 2
    _planned_beside_measured(sim_store, "ref-zero3")
    one = baselines.run("grpo-ref-replica", "grpo", base)  # torch, the reference whole
    sharded, whole = _reference(sim_store, "ref-zero3"), _reference(baselines.store, one)
    assert len(sharded) == len(whole) > 0
    scale = max(abs(x) for row in whole for x in row[3])
    bound = network_bound(AutoConfig.from_pretrained(tiny_model_dir), scale)
    for a, b in zip(sharded, whole, strict=True):
        assert a[:3] == b[:3]  # the same samples
        torch.testing.assert_close(torch.tensor(a[3]), torch.tensor(b[3]), atol=bound, rtol=0)


def _planned_beside_measured(store, run_id: str) -> None:
    """The plan's peak of each step's GPU is recorded beside the measured one; on fake GPUs
    the measured column is empty and `reason` says why (issue 42)."""
    with Catalog(str(store)) as cat:
        rows = cat.sql("SELECT task, role, planned_peak, measured_peak, reason FROM memory_peaks "
                       "WHERE run_id = ? ORDER BY task, role", [run_id]).to_pylist()
    assert {r["role"] for r in rows} >= {"ref", "actor"}, rows
    for row in rows:
        assert row["planned_peak"] > 0 and row["measured_peak"] is None, row
        assert row["reason"].startswith("not measured: no CUDA device"), row
