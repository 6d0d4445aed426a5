"""FlashREINFORCE: the estimator on a two-row case worked by hand, and the flow (one sample
per prompt, asynchronous by default, with 0.11.2's binary-KL trust region on the behaviour
log-probs) running 2 iterations on the tiny model, and resuming bitwise after kill -9."""

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow
from alignflow.tasks.advantages.estimators import AdvantageConfig, RolloutBatch, compute_advantages
from tests.rl.test_rl_resume import _kill_during_learn


def test_batch_mean_baseline_on_every_token_unwhitened():
    """r = (1, 0): mean 0.5, so row 0 gets +0.5 and row 1 −0.5 on each valid token; with
    β = 0.1 and KL = 1 on every token, token t of a row also carries −β·(tokens from t on)."""
    mask = torch.tensor([[1, 1, 0], [1, 1, 1]])
    batch = RolloutBatch(torch.tensor([1.0, 0.0]), mask)
    out = compute_advantages(batch, AdvantageConfig(estimator="flash_reinforce", n=1))
    assert out.advantages.tolist() == [[0.5, 0.5, 0.0], [-0.5, -0.5, -0.5]]
    kl = torch.ones(2, 3) * mask
    cfg = AdvantageConfig(estimator="flash_reinforce", n=1, kl_coef=0.1)
    adv = compute_advantages(RolloutBatch(torch.tensor([1.0, 0.0]), mask, kl), cfg).advantages
    want = torch.tensor([[0.5 - 0.2, 0.5 - 0.1, 0.0], [-0.5 - 0.3, -0.5 - 0.2, -0.5 - 0.1]])
    assert torch.allclose(adv, want, atol=1e-6)


def test_flow_defaults_are_openrlhfs():
    _, cls = load_flow("flash_reinforce")
    cfg = load_config(cls, sets=[])
    assert cfg.algo.advantage.estimator == "flash_reinforce"
    assert cfg.rollout.n_samples_per_prompt == 1 and cfg.staleness == 1 and cfg.uses_generator


# OpenRLHF 0.11.2's FlashREINFORCE: each sequence's mean binary KL between the behaviour
# policy and π_old gated at δ (seq level, mask mode), every sequence weighing the same
TRUST_REGION = ["algo.advantage.is_correction_enable=true",
                "algo.advantage.is_correction_type=seq-mask-tis",
                "algo.advantage.is_correction_gating=binary_kl",
                "algo.advantage.is_correction_threshold=0.01", "algo.loss_agg=seq-mean-token-mean"]


def _sets(rl_sets, iterations):
    sets = [s for s in rl_sets if not s.startswith(("rollout.n_samples", "train.batch_size"))]
    return [*sets, "rollout.n_samples_per_prompt=1", "train.batch_size=8",
            "rollout.max_new_tokens=8", f"train.max_iterations={iterations}", *TRUST_REGION]


@pytest.mark.slow
def test_two_async_iterations_on_the_tiny_model(rl_sets, tmp_path):
    flow, cls = load_flow("flash_reinforce")
    cfg = load_config(cls, sets=_sets(rl_sets, 2))
    out = api.run(flow, cfg, store=str(tmp_path), executor="inline", seed=1, run_id="flash")
    assert out["iterations"] == 2 and len(out["reward_mean"]) == 2
    from alignflow.catalog.catalog import Catalog
    rows = Catalog(str(tmp_path)).sql(
        "SELECT iteration, count(*) AS n, min(staleness) AS s FROM rollouts "
        "WHERE run_id = 'flash' GROUP BY ALL ORDER BY iteration").to_pylist()
    assert [(r["iteration"], r["n"], r["s"]) for r in rows] == [(0, 8, 0), (1, 8, 1)]


def _driver(store: Path, run_id: str, sets: list[str]) -> subprocess.Popen:
    args = [sys.executable, "-m", "alignflow.cli", "run", "flash_reinforce", "--run-id", run_id,
            "--seed", "3", "--executor", "inline", "--store", str(store)]
    for s in sets:
        args += ["--set", s]
    root = Path(__file__).resolve().parents[2]
    return subprocess.Popen(args, cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=dict(os.environ, ALIGNFLOW_LEASE_TTL="2"))


def _weights(store: Path, run_id: str) -> dict:
    return load_file(store / "runs" / run_id / "final" / "actor" / "model.safetensors")


@pytest.mark.slow
def test_kill_in_learn_resumes_bitwise(rl_sets, tmp_path):
    """SIGKILL while iteration 2 learns (batch 3 already generated ahead): the resumed run
    ends with the weights of a run never killed, each batch consumed once."""
    sets, store = _sets(rl_sets, 4), tmp_path / "store"
    _kill_during_learn(_driver(store, "killed", sets), store, "killed")
    time.sleep(2.5)  # the dead driver's lease expires (ALIGNFLOW_LEASE_TTL=2)
    api.resume("killed", store=str(store), executor="inline", force=True)
    straight = _driver(store, "straight", sets)
    assert straight.wait(timeout=600) == 0, straight.stderr.read().decode()[-2000:]
    a, b = _weights(store, "killed"), _weights(store, "straight")
    assert a.keys() == b.keys() and all(bool((a[k] == b[k]).all()) for k in a)
    from alignflow.catalog.catalog import Catalog
    twice = Catalog(str(store)).sql(
        "SELECT run_id, iteration, prompt_id, sample_idx FROM rollout_consumption "
        "GROUP BY ALL HAVING count(*) > 1").num_rows
    assert twice == 0
