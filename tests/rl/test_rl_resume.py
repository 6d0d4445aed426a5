"""Kill the RL driver (SIGKILL) in the middle of iteration 2's learn step, resume, and get
bitwise the weights of a run that was never killed — with the policy's EMA kept (its final
export is the average, which a resume must continue from the checkpoint, not restart)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from alignflow.flows.control import api
from alignflow.flows.journal import runs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXTRA = ["train.max_iterations=4", "train.max_epochs=4", "train.enable_ema=true",
         "train.ema_beta=0.5"]


def _driver(store: Path, run_id: str, sets: list[str]) -> subprocess.Popen:
    args = [sys.executable, "-m", "alignflow.cli", "run", "grpo", "--run-id", run_id,
            "--seed", "3", "--executor", "inline", "--store", str(store)]
    for s in sets:
        args += ["--set", s]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=dict(os.environ, ALIGNFLOW_LEASE_TTL="2"))


def _final_weights(store: Path, run_id: str) -> dict:
    return load_file(store / "runs" / run_id / "final" / "actor" / "model.safetensors")


def _kill_during_learn(proc: subprocess.Popen, store: Path, run_id: str) -> None:
    """SIGKILL once iteration 2's learn step has started (its advantages file exists) and
    before it commits."""
    started = store / "runs" / run_id / "rollout_advantages" / "iter=2"
    deadline = time.time() + 300
    while not (started.exists() and any(started.iterdir())):
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "learn of iteration 2 never started"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_resume_after_kill_in_learn_is_bitwise_equal(rl_sets, tmp_path):
    sets = [*rl_sets, *EXTRA]
    store = tmp_path / "store"
    proc = _driver(store, "killed", sets)
    _kill_during_learn(proc, store, "killed")
    manifests = runs.read_manifests(api.open_store(str(store)), "killed")
    assert "iter-0002/score" in manifests and "iter-0002/learn" not in manifests
    time.sleep(2.5)  # the dead driver's lease expires (ALIGNFLOW_LEASE_TTL=2)
    api.resume("killed", store=str(store), executor="inline", force=True)

    straight = _driver(store, "straight", sets)
    assert straight.wait(timeout=600) == 0, straight.stderr.read().decode()[-2000:]

    resumed, reference = _final_weights(store, "killed"), _final_weights(store, "straight")
    assert reference.keys() == resumed.keys()
    for name, tensor in reference.items():
        assert tensor.dtype == resumed[name].dtype
        assert bool((tensor == resumed[name]).all()), name
    # the policy moved: training did something that resuming had to reproduce
    from alignflow.tasks.modeling.loading import load_causal_lm

    init = load_causal_lm(rl_sets[0].split("=", 1)[1]).state_dict()
    assert any(not bool((init[k] == v).all()) for k, v in reference.items() if k in init)
    # the export is the average, not the policy's last weights
    last = load_file(store / "runs" / "straight" / "checkpoints" / "iter-0003" / "learn" /
                     "actor" / "model.safetensors")
    assert any(not bool((last[k] == v).all()) for k, v in reference.items() if k in last)
