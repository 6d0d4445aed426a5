"""The one-flow pipeline (`examples/learn_arith.py`: SFT → GRPO in one durable run), killed
(SIGKILL) during GRPO and resumed: the run finishes, and SFT is replayed from the journal,
not re-run (its manifests are the very ones the killed driver wrote)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from alignflow.flows.control import api
from alignflow.flows.journal import runs
from examples.learn_arith import curve, learn_arith

ROOT = Path(__file__).resolve().parents[2]
CFG = {"sft_steps": 40, "iterations": 3}
# the same flow, started in a process of its own (the one that gets killed)
DRIVER = ("import sys, alignflow; from examples.learn_arith import learn_arith; "
          "alignflow.run(learn_arith, {'model': sys.argv[1], 'sft_steps': 40, "
          "'iterations': 3}, store=sys.argv[2], run_id='killed', seed=0, executor='inline')")


def _kill_after_first_learn(proc: subprocess.Popen, store: Path) -> None:
    """SIGKILL once GRPO's first learn step is committed (SFT long done)."""
    learned = store / "runs" / "killed" / "tasks" / "grpo" / "iter-0000" / "learn.json"
    deadline = time.time() + 300
    while not learned.exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, "GRPO's first learn step never committed"
        time.sleep(0.005)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_pipeline_killed_in_grpo_resumes_with_sft_replayed(tiny_model_dir, tmp_path):
    assert learn_arith.name == "learn_arith"  # imported here: a flow resume may load
    store = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tiny_model_dir), str(store)],
                            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=dict(os.environ, ALIGNFLOW_LEASE_TTL="2"))
    _kill_after_first_learn(proc, store)
    before = runs.read_manifests(api.open_store(str(store)), "killed")
    sft_keys = sorted(k for k in before if k.startswith("sft/"))
    assert "sft/export" in sft_keys and "grpo/export" not in before
    assert "grpo/iter-0000/learn" in before and "grpo/iter-0002/learn" not in before

    out = api.resume("killed", store=str(store), executor="inline", force=True)
    after = runs.read_manifests(api.open_store(str(store)), "killed")
    assert api.get_status("killed", store=str(store)) == runs.SUCCESSFUL
    assert {k: after[k] for k in sft_keys} == {k: before[k] for k in sft_keys}  # not re-run
    assert sorted(k for k in after if k.startswith("sft/")) == sft_keys
    assert api.get_metadata("killed", store=str(store))["replayed"] >= len(before)
    assert (store / out["grpo"] / "config.json").exists()  # the GRPO export, finished
    points = curve(str(store), "killed", "grpo")
    assert [p["iteration"] for p in points] == [-1, CFG["iterations"] - 1]
