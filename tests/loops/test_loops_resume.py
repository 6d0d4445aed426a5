"""Kill the iterative-DPO driver (SIGKILL) in the middle of round 1's training, resume, and
get bitwise the weights and the committed pairs of a run that was never killed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file

from alignflow.catalog.catalog import Catalog
from alignflow.flows.control import api
from alignflow.flows.journal import runs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
EXTRA = ["ckpt.save_steps=2"]  # 8 training tasks per round: room to land inside a round


def _driver(store: Path, run_id: str, sets: list[str]) -> subprocess.Popen:
    args = [sys.executable, "-m", "alignflow.cli", "run", "iterative_dpo", "--run-id", run_id,
            "--seed", "3", "--executor", "inline", "--store", str(store)]
    for s in sets:
        args += ["--set", s]
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            start_new_session=True, env=dict(os.environ, ALIGNFLOW_LEASE_TTL="2"))


def _kill_after(proc: subprocess.Popen, manifest: Path) -> None:
    deadline = time.time() + 300
    while not manifest.exists():
        assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
        assert time.time() < deadline, f"{manifest} never committed"
        time.sleep(0.002)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


def test_resume_mid_round_is_bitwise_equal(loop_sets, tmp_path):
    sets = [*loop_sets, *EXTRA]
    store = tmp_path / "store"
    proc = _driver(store, "killed", sets)
    _kill_after(proc, store / "runs" / "killed" / "tasks" / "round-0001" / "train-0002.json")
    manifests = runs.read_manifests(api.open_store(str(store)), "killed")
    assert "round-0001/train-0002" in manifests and "round-0001/sync" not in manifests
    time.sleep(2.5)  # the dead driver's lease expires (ALIGNFLOW_LEASE_TTL=2)
    api.resume("killed", store=str(store), executor="inline", force=True)

    straight = _driver(store, "straight", sets)
    assert straight.wait(timeout=600) == 0, straight.stderr.read().decode()[-2000:]

    final = {r: load_file(store / "runs" / r / "final" / "actor" / "model.safetensors")
             for r in ("killed", "straight")}
    assert final["killed"].keys() == final["straight"].keys()
    for name, tensor in final["straight"].items():
        assert bool((tensor == final["killed"][name]).all()), name
    cat = Catalog(str(store))
    q = """SELECT round, pair_id, step, loss, chosen, rejected FROM preferences
           WHERE run_id = ? ORDER BY round, step NULLS FIRST, pair_id"""
    killed, straight = (cat.sql(q, [r]).to_pylist() for r in ("killed", "straight"))
    assert killed == straight and len(killed) > 0
    # the policy moved in round 1 after the kill: resuming had to reproduce real training
    steps = cat.sql("""SELECT count(DISTINCT step) FROM metrics WHERE run_id = 'killed'
                       AND task_key LIKE 'round-0001/train-%'""").to_pylist()
    assert list(steps[0].values())[0] == 16
