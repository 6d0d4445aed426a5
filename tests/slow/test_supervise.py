"""`alignflow run … --supervise` (`flows/cli/supervise.py`): a driver killed with SIGKILL (a
real process, at a commit) is restarted as a plain resume and the run ends with bitwise the
weights of a run never killed; a driver that keeps dying spends its budget and the
supervisor stops with one line; SIGTERM stops the driver and the supervisor, no restart."""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from alignflow.flows.control import api
from alignflow.flows.journal import runs

pytestmark = pytest.mark.slow

SETS = ["data.max_samples=64", "rollout.batch_size=8", "rollout.n_samples_per_prompt=4",
        "rollout.max_new_tokens=8", "reward.sources=rule:target:e", "train.batch_size=16",
        "train.micro_batch_size=8", "actor.adam.lr=1e-2", "actor.lr_warmup_ratio=0",
        "num_threads=1", "train.max_iterations=4"]

DYING = """
import os, signal
from alignflow import flow, task

@task
def die() -> int:
    os.kill(os.getpid(), signal.SIGKILL)  # inline: the driver itself
    return 0

@flow
def dying(cfg: dict) -> int:
    return die()
"""


def _cli(args: list[str], store: Path, log: Path, **env: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "alignflow.cli", *args, "--store", str(store)],
                            stdout=log.open("a"), stderr=subprocess.STDOUT, cwd=log.parent,
                            env=dict(os.environ, ALIGNFLOW_RETRY_BASE="0.01", **env))


def _grpo(model: Path, run_id: str) -> list[str]:
    sets = [f"actor.model_name_or_path={model}", *SETS]
    return ["run", "grpo", "--run-id", run_id, "--executor", "inline",
            *[a for s in sets for a in ("--set", s)]]


def _await(what: str, done, proc: subprocess.Popen, log: Path, timeout: float = 120) -> None:
    """Wait for an observable event (a line, a committed manifest), failing fast if the
    process ends first."""
    deadline = time.time() + timeout
    while not done():
        assert proc.poll() is None, f"ended before {what}:\n{log.read_text()}"
        assert time.time() < deadline, f"{what} never happened:\n{log.read_text()}"
        time.sleep(0.05)


def _driver_pid(log: Path, nth: int = 0) -> int | None:
    pids = re.findall(r"supervising run \S+: driver pid (\d+)", log.read_text())
    return int(pids[nth]) if len(pids) > nth else None


def _weights(store: Path, run_id: str) -> str:
    data = (store / f"runs/{run_id}/final/actor/model.safetensors").read_bytes()
    return hashlib.sha256(data).hexdigest()


def test_a_killed_driver_is_restarted_and_the_run_ends_bitwise(tiny_model_dir, tmp_path):
    store, log = tmp_path / "store", tmp_path / "sup.log"
    sup = _cli([*_grpo(tiny_model_dir, "sup"), "--supervise"], store, log)
    _await("the driver's start", lambda: _driver_pid(log) is not None, sup, log)
    learned = store / "runs/sup/tasks/iter-0001/learn.json"
    _await("iteration 1's learn commit", learned.exists, sup, log)
    os.kill(_driver_pid(log), signal.SIGKILL)
    assert sup.wait(timeout=120) == 0, log.read_text()
    text = log.read_text()
    assert "the driver of run sup died (killed by SIGKILL); restarting it (1 of 10): " \
           "alignflow resume sup" in text, text
    assert _driver_pid(log, 1) is not None and "finished flow grpo" in text
    meta = runs.read_run(api.open_store(str(store)), "sup")
    assert (meta["status"], meta["drivers"]) == (runs.SUCCESSFUL, 2)
    plain = _cli(_grpo(tiny_model_dir, "plain"), store, tmp_path / "plain.log")
    assert plain.wait(timeout=120) == 0, (tmp_path / "plain.log").read_text()
    assert _weights(store, "sup") == _weights(store, "plain")


def test_a_driver_that_keeps_dying_spends_its_budget_in_one_line(tmp_path):
    flow = tmp_path / "dying.py"
    flow.write_text(DYING)
    store, log = tmp_path / "store", tmp_path / "sup.log"
    sup = _cli(["run", f"{flow}:dying", "--run-id", "d", "--executor", "inline",
                "--supervise", "--max-restarts", "1"], store, log)
    assert sup.wait(timeout=120) == 1, log.read_text()
    lines = log.read_text().splitlines()
    assert "alignflow: the driver of run d died (killed by SIGKILL); restarting it (1 of 1): " \
           "alignflow resume d" in lines
    assert lines[-1] == ("error: the driver needed recovery 2 times, over its budget of 1 "
                         "(--max-restarts, $ALIGNFLOW_MAX_RESTARTS); last fault: killed by "
                         "SIGKILL; the run stops here: fix the cause, then `alignflow resume "
                         "d`"), lines
    assert len(re.findall("driver pid", "\n".join(lines))) == 2


def test_sigterm_stops_driver_and_supervisor_without_a_restart(tiny_model_dir, tmp_path):
    store, log = tmp_path / "store", tmp_path / "sup.log"
    sup = _cli([*_grpo(tiny_model_dir, "t"), "--supervise"], store, log)
    _await("the first commit", (store / "runs/t/tasks/prompts.json").exists, sup, log)
    sup.send_signal(signal.SIGTERM)  # a pod stopped
    assert sup.wait(timeout=60) == 130, log.read_text()
    assert "restarting" not in log.read_text()
    assert api.get_status("t", store=str(store)) == runs.RESUMABLE


def _timeline(path: Path, event: str) -> list[int]:
    """Pids of the processes that marked `event` (`$ALIGNFLOW_TIMELINE`), in order."""
    if not path.exists():
        return []
    lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [e["pid"] for e in lines if e["event"] == event]


def test_on_a_cluster_the_next_driver_takes_over_the_live_workers(tiny_model_dir, tmp_path):
    """`--simulate-cluster`: the supervisor holds the cluster, the drivers join it; the
    workers of a driver killed after a learn commit outlive it and the next driver adopts
    them (restored from the newest checkpoint); then a rank of the actor's group is killed,
    the group is formed again, and its new rank 0 takes over the two generation engines the
    dead one drove (no engine starts again). The weights are those of the same run on the
    same simulated cluster never killed, bitwise (~2 min: two simulated runs). The roles on
    hosts of their own: the reference and reward hosts (no trainer, no engine) are taken
    over as they are."""
    store, timeline = tmp_path / "store", tmp_path / "timeline.jsonl"
    sim = ["--simulate-cluster", "1x8", "--set", "placement.num_cpus=0.5", "--set",
           "train.max_iterations=3", "--set", "train.colocate_all=false", "--set",
           "rollout.engine=vllm", "--set", "vllm.num_engines=2", "--set",
           "actor.num_gpus_per_node=2"]
    runs_of = {run_id: [a if a != "inline" else "auto" for a in _grpo(tiny_model_dir, run_id)]
               for run_id in ("c", "ref")}
    log = tmp_path / "sup.log"
    sup = _cli([*runs_of["c"], *sim, "--supervise"], store, log,
               ALIGNFLOW_TIMELINE=str(timeline))
    _await("the driver's start", lambda: _driver_pid(log) is not None, sup, log, 180)
    tasks = store / "runs/c/tasks"
    _await("iteration 0's learn commit", (tasks / "iter-0000/learn.json").exists, sup, log, 180)
    os.kill(_driver_pid(log), signal.SIGKILL)
    _await("iteration 1's learn commit", (tasks / "iter-0001/learn.json").exists, sup, log, 180)
    (rank0,) = _timeline(timeline, "rank 0 joined")  # the actor's ranks were taken over
    os.kill(rank0, signal.SIGKILL)  # the rank that drives the engines
    assert sup.wait(timeout=240) == 0, log.read_text()
    said = log.read_text()
    assert "host actor: taken over from the dead driver (restored" in said, said
    for frozen in ("ref", "reward"):
        assert f"host {frozen}: taken over from the dead driver (immutable" in said, said
    assert re.search(r"iter-000[12]/\w+ attempt 1 failed \(ActorDiedError", said), said
    assert len(_timeline(timeline, "rank 0 joined")) == 2  # the group was formed again
    assert len(_timeline(timeline, "engine up")) == 2  # its engines were not
    ref = _cli([*runs_of["ref"], *sim], store, tmp_path / "ref.log")
    assert ref.wait(timeout=240) == 0, (tmp_path / "ref.log").read_text()
    assert _weights(store, "c") == _weights(store, "ref")
