"""Warm spares (`flows/ray/spares.py`), on a real Ray runtime: a supervised driver keeps
idle workers of its job that imported torch and transformers at start (Ray's setup hook);
a worker group formed again takes them as its ranks (with torch's threads as Ray assigned
them, not every core), and the driver asks for new ones.
The driver runs in a child process (`spares_child.py`): a job's runtime environment is
fixed when it joins Ray, and the suite's own Ray has none."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from alignflow.flows.ray import adopt, spares

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_a_group_formed_again_takes_the_spares_and_they_are_replaced(tmp_path):
    timeline = tmp_path / "timeline.jsonl"
    env = {**os.environ, "ALIGNFLOW_TIMELINE": str(timeline), "RAY_AUTH_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-m", "tests.faults.spares_child"], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    pids = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(pids["second"]) == set(pids["spares"])  # both ranks started on spares
    assert not set(pids["refill"]) & set(pids["second"])  # and new spares replaced them
    for torch_threads, assigned, _gpu in pids["threads"]:  # imported before Ray sized the
        assert str(torch_threads) == assigned  # rank, torch still follows Ray's threads
    assert sorted(gpu for *_, gpu in pids["threads"]) == ["0", "1"]  # each its bundle's GPU
    marks = [json.loads(line) for line in timeline.read_text().splitlines()]
    for pid in pids["second"]:
        events = [m["event"] for m in marks if m["pid"] == pid]
        # the hook's imports were done before the rank's actor was built in that process
        assert events.index("spare imported") < events.index("rank up"), events


def test_only_a_supervised_driver_joins_with_the_setup_hook(monkeypatch):
    monkeypatch.delenv(adopt.SUPERVISED_ENV, raising=False)
    assert spares.runtime_env(("m",)) is None
    monkeypatch.setenv(adopt.SUPERVISED_ENV, "1")
    env = spares.runtime_env(("alignflow.tasks.rl.learn", "torch"))
    assert env["worker_process_setup_hook"] == spares.HOOK
    assert env["env_vars"][spares.IMPORTS_ENV] == \
        "torch,transformers.modeling_utils,alignflow.tasks.rl.learn"


def test_a_job_submitted_with_its_own_setup_hook_gets_no_spares(monkeypatch):
    from ray._private.runtime_env.constants import RAY_JOB_CONFIG_JSON_ENV_VAR

    monkeypatch.setenv(adopt.SUPERVISED_ENV, "1")
    monkeypatch.setenv(RAY_JOB_CONFIG_JSON_ENV_VAR,
                       json.dumps({"runtime_env": {"worker_process_setup_hook": "x.y"}}))
    assert spares.runtime_env(()) is None  # Ray refuses two hooks: the job's stays


def test_the_hook_imports_what_the_job_names_and_leaves_failures_to_the_task(monkeypatch):
    from ray._private import utils as ray_utils

    monkeypatch.setenv(spares.IMPORTS_ENV, "json,no_such_module_here,colorsys")
    monkeypatch.setattr(ray_utils, "set_omp_num_threads_if_unset", lambda: False)
    sys.modules.pop("colorsys", None)
    spares.import_ahead()  # on a side thread, until Ray is about to run the first task:
    ray_utils.set_omp_num_threads_if_unset()  # which waits for the imports
    assert "colorsys" in sys.modules and not spares._warming.thread.is_alive()


def test_the_ledger_counts_only_workers_that_appeared_after_an_ask():
    ledger = spares._Ledger()
    engine_worker = {101}  # idle, never used, of another runtime env: no rank can take it
    ledger.learn(engine_worker, now=0.0)
    assert ledger.missing(1) == 1
    ledger.asked(1, engine_worker, now=0.0)
    assert ledger.missing(1) == 0  # asked for, not up yet
    ledger.learn({101, 205, 206}, now=1.0)  # ours, and one Ray started for another lease
    assert ledger.ours == {205} and ledger.missing(1) == 0
    ledger.learn({101, 206}, now=2.0)  # a rank took it
    assert ledger.missing(1) == 1
    ledger.asked(1, {101, 206}, now=2.0)
    ledger.learn({101, 206}, now=2.0 + spares.STARTING_S)  # taken before it was ever seen
    assert ledger.missing(1) == 1


def test_a_spare_a_rank_passed_over_is_not_counted_again():
    ledger = spares._Ledger()
    ledger.asked(1, set(), now=0.0)
    ledger.learn({205}, now=1.0)  # appeared after the ask: taken for ours
    ledger.formed({300})  # but the rank formed beside it started in a new process
    assert ledger.missing(1) == 1
    ledger.asked(1, {205}, now=2.0)
    ledger.learn({205, 310}, now=3.0)
    assert ledger.ours == {310}
    ledger.formed({310})  # the next rank took the real one
    assert ledger.ours == set() and ledger.unusable == {205} and ledger.missing(1) == 1


def test_a_node_lost_while_the_keeper_asks_it_does_not_turn_spares_off(monkeypatch):
    import grpc

    class Lost(grpc.RpcError):
        pass

    asked = []

    def idle(stub):
        if stub == "lost":
            raise Lost("the raylet is gone")
        return set()

    monkeypatch.setattr(spares, "_raylets", lambda: {"a": "lost", "b": "alive"})
    monkeypatch.setattr(spares, "_idle_workers", idle)
    monkeypatch.setattr(spares, "_prestart", lambda stub, n: asked.append((stub, n)))
    keeper = spares._Keeper()
    keeper.wanted["actor"] = {"a": 1, "b": 1}
    keeper.top_up()  # raises nothing: the lost node is skipped, the other one asked
    assert asked == [("alive", 1)] and not keeper.broken
