"""How the simulated-cluster tests check a run: its plan, what each process saw, and its
result against the single-process run.

Tolerance where reductions reorder (`reorder_atol`). A data-parallel step sums each
gradient element over the minibatch in parts (one per rank), then adds them; the single
process adds the same n terms in another order. Two float32 sums of the same n terms lie
within 2·γ_n·Σ|tᵢ| of each other (γ_n = n·u/(1 − n·u), u = 2⁻²⁴: `tests/tolerance.py`),
a relative δ = 2·γ_n·κ of the gradient, κ = Σ|tᵢ|/|Σtᵢ| its cancellation factor. AdamW
moves a weight by lr·m̂/(√v̂ + ε), at most lr, and a relative change δ of the gradients
moves m̂ and √v̂ alike, so the step by at most lr·2δ: over S steps the weights lie within
S·lr·4·γ_n·κ. n is the terms of one sum (the tokens of a minibatch); κ is not known per
element: KAPPA covers all but near-cancelling sums, whose Adam step is ±lr either way.
(Measured: 0, since each rank's share is one micro-batch, which the single process adds in
the same order.) A run with one worker per role reorders nothing: it must be bitwise equal.
"""

from __future__ import annotations

import torch
from safetensors.torch import load_file

from alignflow.catalog.catalog import Catalog
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.journal import codec, runs
from alignflow.flows.loader import load_flow
from alignflow.tasks.plan.cluster import Cluster
from alignflow.tasks.plan.records import RunPlan
from alignflow.tasks.simulate.cluster import default_cpus
from tests.tolerance import gamma

KAPPA = 30.0


def reorder_atol(*, steps: int, lr: float, terms: int) -> float:
    """The bound above on |Δw| after `steps` AdamW steps of `lr` whose gradient sums of
    `terms` terms were split over ranks (γ_n: `tests/tolerance.py`)."""
    return steps * lr * 4 * gamma(terms) * KAPPA


LR, STEPS = 1e-2, 2 * 2  # iterations × minibatches of 16 of the 32 samples, 1 epoch
DP_ATOL = reorder_atol(steps=STEPS, lr=LR, terms=512)  # ≤ 16 sequences × 32 tokens a sum
SIM = ["rollout.engine=vllm", "vllm.max_num_seqs=8"]  # vLLM decodes 8 at a time, as HF does


def weights(store, run_id: str, folder: str = "actor") -> dict[str, torch.Tensor]:
    """The run's final export (a full model, or a LoRA adapter)."""
    files = sorted((store / "runs" / run_id / "final" / folder).glob("*.safetensors"))
    assert files, f"run {run_id} exported no weights"
    return {k: v for f in files for k, v in load_file(f).items()}


def rollouts(store, run_id: str) -> list[dict]:
    with Catalog(str(store)) as cat:
        return cat.sql("SELECT iteration, prompt_id, sample_idx, response_ids, "
                       "behaviour_logprobs, reward FROM rollouts WHERE run_id = ? "
                       "ORDER BY iteration, prompt_id, sample_idx", [run_id]).to_pylist()


def assert_close_weights(a: dict, b: dict, atol: float) -> float:
    """Same tensors within `atol` (0: bitwise); returns the largest difference."""
    assert a.keys() == b.keys()
    worst = max(float((a[k].double() - b[k].double()).abs().max()) for k in a)
    assert worst <= atol, f"weights differ by up to {worst:.3g}, allowed {atol:.3g}"
    return worst


def recorded_plan(store, run_id: str):
    """The plan the run settled on (run.json), and run.json's `simulated` record."""
    meta = runs.read_run(api.open_store(str(store)), run_id)
    plan = codec.decode(meta["plan"], "run.json")
    assert isinstance(plan, RunPlan)
    return plan, meta["simulated"]


def planned(flow: str, sets: list[str], spec: str):
    """The plan `--simulate-cluster SPEC` (and its dry run) makes for this config."""
    nodes, gpus = (int(x) for x in spec.split("x"))
    _fn, cls = load_flow(flow)
    return load_config(cls, sets=sets).run_plan(Cluster(
        nodes=nodes, gpus_per_node=gpus, cpus_per_node=default_cpus(gpus), simulated=True))


def processes(seen: list[dict]) -> dict[int, dict]:
    """pid -> what that process saw: its node, the fake GPUs Ray gave it, its device, its
    actor and rank, and every kind of thing it built there (a host, an engine)."""
    out: dict[int, dict] = {}
    for s in seen:
        mine = out.setdefault(s["pid"], {**s, "kinds": set()})
        mine["kinds"].add(s["kind"])
    return out


def gpus_of(seen: list[dict]) -> dict[str, list[tuple[int, str]]]:
    """kind -> the (node, CUDA_VISIBLE_DEVICES) of each process that built one, sorted.
    Fake GPUs are never shared between processes unless the plan gives fractions."""
    procs = processes(seen)
    taken = [(p["node"], p["cuda_visible_devices"]) for p in procs.values()
             if p["cuda_visible_devices"]]
    assert len(taken) == len(set(taken)), f"processes share a fake GPU: {sorted(taken)}"
    assert all(p["device"] == ("cuda:0" if p["cuda_visible_devices"] else "cpu")
               for p in procs.values()), procs
    out: dict[str, list] = {}
    for p in procs.values():
        for kind in p["kinds"]:
            out.setdefault(kind, []).append((p["node"], p["cuda_visible_devices"]))
    return {k: sorted(v) for k, v in out.items()}


def assert_same_rollouts(a_store, a: str, b_store, b: str, *, logprob_atol: float,
                         first_atol: float = 0.0) -> None:
    """The same samples (token ids, rewards); behaviour logprobs equal in the first
    iteration (the same weights; within `first_atol` where shards are padded to other
    lengths than the single process's micro-batches, so the same rows pass kernels of
    other shapes) and within `logprob_atol` after (weights within the reorder bound)."""
    ra, rb = rollouts(a_store, a), rollouts(b_store, b)
    assert len(ra) == len(rb) > 0
    for x, y in zip(ra, rb, strict=True):
        assert (x["iteration"], x["prompt_id"], x["sample_idx"], x["response_ids"]) == (
            y["iteration"], y["prompt_id"], y["sample_idx"], y["response_ids"])
        assert x["reward"] == y["reward"]
        atol = first_atol if x["iteration"] == 0 else logprob_atol
        torch.testing.assert_close(torch.tensor(x["behaviour_logprobs"]),
                                   torch.tensor(y["behaviour_logprobs"]), atol=atol, rtol=0)


def engine_gpus(gpus: dict[str, list]) -> list:
    """Where the vLLM engines (or their HF stand-ins) ran."""
    return sorted(g for kind, seen in gpus.items() if kind.startswith("vllm engine")
                  for g in seen)
