"""`alignflow run FLOW ... --simulate-cluster 1x2` from the command line (a process of its
own, as a user's): it starts the simulated cluster, runs the flow there, stops it, and
marks the run: run.json's `simulated` (the cluster, what each process saw), `alignflow ls`
and the catalog's `runs` view. Its dry run plans for the simulated cluster."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.cli import main

pytestmark = pytest.mark.slow


def _sets(grpo_sets: list[str]) -> list[str]:
    sets = [*grpo_sets, "train.max_iterations=1", "rollout.engine=vllm", "vllm.max_num_seqs=8",
            "train.colocate_all=true"]  # one host (unset on GPUs: roles apart, as OpenRLHF)
    return [arg for s in sets for arg in ("--set", s)]


def test_the_dry_run_plans_for_the_simulated_cluster(capsys, grpo_sets):
    assert main(["run", "grpo", *_sets(grpo_sets), "--dry-run", "--simulate-cluster", "1x2"]) == 0
    out = capsys.readouterr().out
    assert "plan: 1 node(s) × 2 GPU(s), 8 CPU(s) per node (simulated on this machine: fake " \
           "GPUs); the run takes 1 GPU(s)" in out
    assert "vllm in-process" in out and "executor: ray" in out


def test_a_simulated_run_from_the_command_line_is_marked(grpo_sets, tmp_path):
    store = tmp_path / "store"
    cli = [sys.executable, "-m", "alignflow.cli"]
    done = subprocess.run([*cli, "run", "grpo", *_sets(grpo_sets), "--simulate-cluster", "1x2",
                           "--store", str(store), "--run-id", "cli-sim"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert "starting a simulated cluster: 1 node(s) × 2 GPU(s)" in done.stderr
    meta = json.loads((store / "runs/cli-sim/run.json").read_text())
    seen = meta["simulated"]
    assert seen["cluster"] == "1x2" and {a["kind"] for a in seen["actors"]} == {
        "host models", "vllm engine (HF stand-in)"}
    assert {(a["node"], a["cuda_visible_devices"], a["device"]) for a in seen["actors"]} == {
        (0, seen["actors"][0]["cuda_visible_devices"], "cuda:0")}
    listed = subprocess.run([*cli, "ls", "--store", str(store)], capture_output=True, text=True,
                            timeout=120)
    assert "SUCCESSFUL (simulated 1x2)" in listed.stdout, listed.stdout + listed.stderr
    with Catalog(str(store)) as cat:
        assert cat.sql("SELECT simulated FROM runs WHERE run_id = 'cli-sim'").to_pylist() == [
            {"simulated": "1x2"}]
