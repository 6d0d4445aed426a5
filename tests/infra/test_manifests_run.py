"""The KubeRay manifests' commands run as written on a two-node Ray cluster on this machine
(`infra/local_cluster.sh`, one cluster for both), training the tiny model from S3 (moto's
server) with GSM8K prompts and labels at the URLs the manifests name:
- the RayJob's entrypoint on the head (`--address auto`, with RAY_ADDRESS set as KubeRay
  sets it), interrupted after its first commit (SIGTERM, as a pod stop) and run again as a
  retry would (`backoffLimit`): the second attempt continues the run;
- the RayCluster file's Job command, its driver joined through Ray Client, the actor's
  workers on both nodes.

What the test substitutes, and nothing else: the image (this checkout's `alignflow`), the
addresses (the Ray head's and the S3 endpoint: `AWS_ENDPOINT_URL`), the Secret's values
(moto's credentials), the cache volume's mount (a folder here), and the sizes appended as
flags of their own (`SCALE`: iterations, batch sizes, lengths, one CPU worker per node in
place of a GPU each); the GPU layout of each command is checked against its manifest's
GPUs in tests/infra/test_kuberay.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests.infra.manifests import cluster_spec, container_env, run_pod, upload_manifest_sources
from tests.infra.test_two_nodes import _free_ports, _script

pytestmark = pytest.mark.slow

SCALE = ["--train.max_iterations", "2", "--rollout.batch_size", "4",
         "--rollout.n_samples_per_prompt", "2", "--rollout.max_new_tokens", "8",
         "--train.batch_size", "8", "--train.micro_batch_size", "4", "--num_threads", "1",
         "--placement.num_cpus", "0.5", "--actor.num_gpus_per_node", "1"]
SECRETS = {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}


def _value(argv: list[str], flag: str) -> str:
    return argv[argv.index(flag) + 1]


def _pod_env(name: str, s3: str, cache: Path) -> dict[str, str]:
    """A pod's environment as the manifest writes it, on this machine."""
    head = cluster_spec(name)["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = container_env(head, SECRETS)
    env.update(AWS_ENDPOINT_URL=s3, XDG_CACHE_HOME=str(cache))
    return env


@pytest.fixture(scope="module")
def cluster(s3_server, tiny_model_dir, tmp_path_factory):
    """(address, client env): the two-node cluster, its nodes started with the pods'
    environment; the model and data uploaded where the manifests name them."""
    upload_manifest_sources(s3_server, tiny_model_dir)
    here = tmp_path_factory.mktemp("manifests")
    pods = _pod_env("rayjob.yaml", s3_server, here / "cache")
    store = _store(pods)
    if not store.fs.exists(store.root.split("/")[0]):
        store.fs.mkdir(store.root.split("/")[0])
    cluster_dir = f"/tmp/afmr-{uuid.uuid4().hex[:8]}"
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(pods, CLUSTER_DIR=cluster_dir, RAY_PORT=str(_free_ports()), HEAD_CPUS="2",
               WORKER_CPUS="1", RAY=str(Path(sys.executable).parent / "ray"),
               # the Ray Client server's driver process for a client took up to 26 s to
               # start on 2 busy cores; Ray gives it 30 s
               RAY_CLIENT_SERVER_CHECK_CHANNEL_TIMEOUT_S="120")
    try:
        address = _script(env, "start").splitlines()[-1]
        env.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=f"{cluster_dir}/auth_token")
        yield address, env, here
    finally:
        _script(env, "stop")
        subprocess.run(["rm", "-rf", cluster_dir], check=False)


def _store(env: dict) -> Store:
    return Store.open(env["ALIGNFLOW_STORE"],
                      storage_options={"endpoint_url": env["AWS_ENDPOINT_URL"]})


def _command(argv: list[str]) -> list[str]:
    assert argv[0] == "alignflow"  # the image's; here this checkout's
    return [sys.executable, "-m", "alignflow.cli", *argv[1:], *SCALE]


def _start(argv: list[str], env: dict, log: Path) -> subprocess.Popen:
    return subprocess.Popen(_command(argv), env=env, cwd=log.parent, stdout=log.open("a"),
                            stderr=subprocess.STDOUT, start_new_session=True)


def _finished(run_id: str, env: dict) -> None:
    store = _store(env)
    assert api.get_status(run_id, store=store) == runs.SUCCESSFUL
    manifests = runs.read_manifests(store, run_id)
    assert {f"iter-{i:04d}/learn" for i in range(2)} <= set(manifests)
    meta = runs.read_run(store, run_id)
    assert set(meta["sources"]) == {"actor.model_name_or_path", "data.prompt_dataset"}
    assert all(m["attempts"] == 1 for m in manifests.values())  # nothing ran twice


def test_the_rayjob_entrypoint_runs_and_its_retry_continues_the_run(cluster):
    address, env, here = cluster
    job, argv = run_pod("rayjob.yaml")
    env = dict(env, RAY_ADDRESS=address)  # what KubeRay gives the entrypoint on the head
    run_id, log = _value(argv, "--run-id"), here / "rayjob.log"
    store = _store(env)
    first = _start(argv, env, log)
    deadline = time.time() + 240
    while not store.exists(runs.manifest_path(run_id, "iter-0000/generate")):
        assert first.poll() is None and time.time() < deadline, log.read_text()
        time.sleep(0.2)
    first.send_signal(signal.SIGTERM)  # the pod is stopped
    assert first.wait(timeout=60) == 130, log.read_text()
    assert api.get_status(run_id, store=store) == runs.RESUMABLE  # its lease released
    done = store.read_json(runs.manifest_path(run_id, "iter-0000/generate"))
    retry = _start(argv, env, log)  # backoffLimit: the same command again
    assert retry.wait(timeout=300) == 0, log.read_text()
    assert store.read_json(runs.manifest_path(run_id, "iter-0000/generate")) == done  # kept
    _finished(run_id, env)


def test_the_raycluster_job_runs_through_ray_client_on_both_nodes(cluster):
    address, env, here = cluster
    _job, argv = run_pod("raycluster.yaml")
    host, port = address.rsplit(":", 1)
    client = f"ray://{host}:{int(port) + 1}"  # the head service's client port, here
    argv = [client if a == "ray://alignflow-head-svc:10001" else a for a in argv]
    log = here / "raycluster.log"
    job = _start(argv, env, log)
    assert job.wait(timeout=300) == 0, log.read_text()
    assert "2 workers" in log.read_text()  # the actor on both nodes (actor_num_nodes 2)
    _finished(_value(argv, "--run-id"), env)
