"""A GRPO run on a two-node Ray cluster on this machine (`infra/local_cluster.sh`: a head and
a worker node with its own `worker_node` resource), its store on S3 (moto), the actor group
of 2 workers spread over both nodes (STRICT_SPREAD, checked from Ray's state, not assumed).
The worker node is killed (SIGKILL of its raylet, agents and Ray workers) right after a learn
step commits. The real behaviour: the driver sees the rank on it die, kills the group and,
rebuilding it, waits for a placement over two nodes ($ALIGNFLOW_PLACEMENT_TIMEOUT, 300s);
once the worker node is started again the group is rebuilt on it from the newest committed
checkpoint and the run completes by itself (no `alignflow resume`), with every iteration's
rollouts committed exactly once and the final policy exported.

The kill lands in a sync/generate/score step: a learn step's manifest is written only once
its checkpoint is (rank 0's background write), and the next one is an iteration away. A kill
in the middle of a checkpoint write on the lost node is recovered too (the learn step runs
again from the newest committed checkpoint, `flows/control/recovery.py`); that case is
tests/fast/test_recovery_budget.py's, not this test's.

Only this test's cluster is stopped at the end (by PID, `local_cluster.sh stop`)."""

from __future__ import annotations

import json
import os
import random
import re
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import psutil
import pytest

from alignflow.catalog.catalog import Catalog
from alignflow.flows.control import api
from alignflow.flows.journal import runs

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "infra/local_cluster.sh"
RUN, ITERATIONS, PROMPTS, SAMPLES = "two-nodes", 6, 8, 4

# Polls Ray's state (GCS; the cluster runs no dashboard) until both ranks of the run's actor
# group are alive (leaving out the pids given after the run id: an earlier group's), then
# prints where they are: pid and node of each rank, and the live nodes with their resources.
PROBE = """
import json, sys, time, ray
from ray._private import state
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
prefix, deadline = f"alignflow:{sys.argv[2]}:models:", time.time() + 300
old = {int(p) for p in sys.argv[3:]}
while True:
    ranks = {a["Name"]: a for a in state.actors().values()
             if (a["Name"] or "").startswith(prefix) and a["State"] == "ALIVE"
             and a["Pid"] not in old}
    if len(ranks) == 2 or time.time() > deadline:
        break
    time.sleep(0.2)
nodes = {n["NodeID"]: sorted(n["Resources"]) for n in ray.nodes() if n["Alive"]}
print(json.dumps({"ranks": {k[len(prefix):]: {"pid": a["Pid"], "node": a["Address"]["NodeID"]}
                            for k, a in ranks.items()}, "nodes": nodes}))
"""


def _free_ports(n: int = 4) -> int:
    """A port p with p..p+n-1 free (the GCS, client server and two agent ports), below the
    ephemeral range and above Ray's worker ports (10002-19999)."""
    for _ in range(200):
        base = random.randrange(21000, 29000)
        try:
            for port in range(base, base + n):
                with socket.socket() as sock:
                    sock.bind(("0.0.0.0", port))
        except OSError:
            continue
        return base
    raise RuntimeError("no free ports")


def _script(env: dict, *args: str) -> str:
    out = subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True,
                         text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout.strip()


@pytest.fixture
def cluster(s3_server):
    """(address, env): the two-node cluster, started with the moto S3 settings so that Ray
    workers on both nodes reach the store; env is what a client of it needs."""
    cluster_dir = f"/tmp/af2n-{uuid.uuid4().hex[:8]}"  # short: Ray's socket paths
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(AWS_ENDPOINT_URL=s3_server, CLUSTER_DIR=cluster_dir, RAY_PORT=str(_free_ports()),
               HEAD_CPUS="2", WORKER_CPUS="1", RAY=str(Path(sys.executable).parent / "ray"))
    try:
        address = _script(env, "start").splitlines()[-1]
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=f"{cluster_dir}/auth_token")
        yield address, env
    finally:
        _script(env, "stop")
        subprocess.run(["rm", "-rf", cluster_dir], check=False)


def _grpo_sets(model: Path) -> list[str]:
    """tests/rl's small GRPO run on the tiny model; the actor on 2 nodes, 1 worker each."""
    sets = [f"actor.model_name_or_path={model}", "data.max_samples=64",
            f"rollout.batch_size={PROMPTS}", f"rollout.n_samples_per_prompt={SAMPLES}",
            "rollout.max_new_tokens=8", "reward.sources=rule:target:e", "train.batch_size=16",
            "train.micro_batch_size=8", "actor.adam.lr=1e-2", "actor.lr_warmup_ratio=0",
            "num_threads=1", f"train.max_iterations={ITERATIONS}", "train.max_epochs=1",
            "placement.num_cpus=0.5", "actor.num_nodes=2", "actor.num_gpus_per_node=1"]
    return [arg for s in sets for arg in ("--set", s)]


def _cli(env: dict, log: Path, *args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "alignflow.cli", *args], env=env,
                            cwd=log.parent, stdout=log.open("a"), stderr=subprocess.STDOUT)


def _wait(what: str, done, proc: subprocess.Popen, log: Path, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while not done():
        assert proc.poll() is None, f"the run ended before {what}:\n{log.read_text()}"
        assert time.time() < deadline, f"{what} never happened:\n{log.read_text()}"
        time.sleep(0.05)


def _raylet_of(pid: int) -> str:
    """'worker' or 'head': whose raylet started process `pid` (its resources tell)."""
    for parent in psutil.Process(pid).parents():
        line = " ".join(parent.cmdline())
        if "raylet/raylet" in line:
            return "worker" if ",worker_node,1" in line or "=worker_node,1" in line else "head"
    raise AssertionError(f"pid {pid} is no Ray worker of this cluster")


def _check_spread(placed: dict, processes: bool = True) -> dict[str, str]:
    """Both ranks alive on two nodes, the head and the worker node, by Ray's node ids and
    (`processes`: while they run) by the raylet that started each; returns, by node, the
    rank's pid and the node's id."""
    ranks, nodes = placed["ranks"], placed["nodes"]
    assert set(ranks) == {"0", "1"}, placed
    # a killed node stays "alive" in the GCS until its heartbeats are missed: >= 2 nodes
    assert all(r["node"] in nodes for r in ranks.values()), placed
    assert len({r["node"] for r in ranks.values()}) == 2, placed
    where = {"worker" if "worker_node" in nodes[r["node"]] else "head": r
             for r in ranks.values()}
    assert set(where) == {"head", "worker"}, placed
    if processes:
        assert {k: _raylet_of(r["pid"]) for k, r in where.items()} == {"head": "head",
                                                                       "worker": "worker"}
    return {"worker_pid": where["worker"]["pid"], "head_pid": where["head"]["pid"],
            "worker_node": where["worker"]["node"], "head_node": where["head"]["node"]}


def _probe(address: str, env: dict, *old_pids: int) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", PROBE, address, RUN, *map(str, old_pids)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _placed(probe: subprocess.Popen) -> dict:
    out, err = probe.communicate(timeout=400)
    assert probe.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1])


def _start_and_probe(address: str, env: dict, store_url: str, model: Path, log: Path):
    """The driver (a process of its own, like a user's) and, beside it, the probe."""
    driver = _cli(env, log, "run", "grpo", *_grpo_sets(model), "--store", store_url,
                  "--address", address, "--run-id", RUN, "--seed", "1")
    return driver, _placed(_probe(address, env))


def _kill_after_next_learn(store, env: dict, driver, log: Path, worker_pid: int) -> None:
    """SIGKILL the worker node just after a learn step commits: the next checkpoint write
    is a whole iteration away, so the kill lands in a sync/generate/score step."""
    def learned(i: int) -> bool:
        return store.exists(runs.manifest_path(RUN, f"iter-{i:04d}/learn"))

    nxt = next(i for i in range(ITERATIONS) if not learned(i))
    assert nxt < ITERATIONS - 2, "the run got too far before the probe answered"
    rank = psutil.Process(worker_pid)
    _wait(f"iteration {nxt}'s learn commit", lambda: learned(nxt), driver, log)
    assert _script(env, "kill-worker").startswith("killed ")
    _, alive = psutil.wait_procs([rank], timeout=10)
    assert not alive, "the rank on the worker node survived the kill"


def _check_nothing_lost(store) -> None:
    assert api.get_status(RUN, store=store) == runs.SUCCESSFUL
    with Catalog(store) as cat:
        rows = cat.sql("SELECT iteration, count(*) AS n, count(DISTINCT (prompt_id, sample_idx)) AS "
                       "uniq, count(DISTINCT task_key) AS tasks FROM rollouts WHERE run_id = ? "
                       "GROUP BY iteration ORDER BY iteration", [RUN]).to_pylist()
    assert [r["iteration"] for r in rows] == list(range(ITERATIONS)), rows
    for r in rows:
        assert r["n"] == r["uniq"] == PROMPTS * SAMPLES and r["tasks"] == 1, r
    manifests = runs.read_manifests(store, RUN)
    assert all(f"iter-{i:04d}/learn" in manifests for i in range(ITERATIONS))
    model = api.get_output(RUN, store=store)["model"]
    assert model == f"runs/{RUN}/final/actor" and store.exists(f"{model}/model.safetensors")


def _back_and_done(env: dict, driver, log: Path) -> None:
    """Once the driver has seen the rank die (and waits for a placement of the rebuilt
    group), start the worker node again: the run completes by itself."""
    _wait("the driver's retry", lambda: "retrying in" in log.read_text(), driver, log, 120)
    _script(env, "start-worker")
    assert driver.wait(timeout=300) == 0, log.read_text()


def test_worker_node_killed_mid_run_and_back_completes_the_run(cluster, s3_store, tiny_model_dir,
                                                               tmp_path):
    address, env = cluster
    log = tmp_path / "driver.log"
    driver, placed = _start_and_probe(address, env, s3_store.url, tiny_model_dir, log)
    again = None
    try:
        first = _check_spread(placed)
        _kill_after_next_learn(s3_store, env, driver, log, first["worker_pid"])
        # the rebuilt group, once it is up: both ranks new, one on the restarted worker node
        again = _probe(address, env, first["worker_pid"], first["head_pid"])
        _back_and_done(env, driver, log)
        second = _check_spread(_placed(again), processes=False)  # the run has ended
    finally:
        for proc in (driver, again):
            if proc is not None and proc.poll() is None:
                proc.kill()
    text = log.read_text()
    assert re.search(r"worker group 'models'( \(pid \d+\))? died", text), text
    assert "finished flow grpo" in text, text
    assert second["head_node"] == first["head_node"]
    assert second["worker_node"] != first["worker_node"]  # a new node, the old one is dead
    retried = [k for k, m in runs.read_manifests(s3_store, RUN).items() if m["attempts"] > 1]
    assert retried, "no task ran again after the node was killed"
    _check_nothing_lost(s3_store)
