"""`infra/local_cluster.sh stop` ends every process of its cluster: the nodes and the Ray
Client server, which names only the cluster's address (it used to stay up, listening). Its
head's GCS gives up on a lost node as fast as tasks/simulate/node_health.py says."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import psutil
import pytest

from alignflow.tasks.simulate import node_health
from tests.infra.test_two_nodes import SCRIPT, _free_ports, _script

pytestmark = pytest.mark.slow


def test_stop_leaves_no_process_and_no_port_of_the_cluster():
    cluster_dir, port = f"/tmp/afcl-{uuid.uuid4().hex[:8]}", _free_ports()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")}
    env.update(CLUSTER_DIR=cluster_dir, RAY_PORT=str(port), HEAD_CPUS="1", WORKER_CPUS="1",
               RAY=str(Path(sys.executable).parent / "ray"))
    try:
        address = _script(env, "start").splitlines()[-1]
        assert _gcs_health_env(cluster_dir) == dict(node_health.ENV)  # (while it is up)
    finally:
        _script(env, "stop")
        subprocess.run(["rm", "-rf", cluster_dir], check=False)
    left = [p.info["pid"] for p in psutil.process_iter(["pid", "cmdline"])
            if any(address in a or cluster_dir in a for a in p.info["cmdline"] or [])]
    assert left == []
    listening = [c.laddr.port for c in psutil.net_connections("tcp")
                 if c.status == psutil.CONN_LISTEN and port <= c.laddr.port < port + 4]
    assert listening == []  # the GCS, the Ray Client server, the agents


def _gcs_health_env(cluster_dir: str) -> dict[str, str]:
    """The health-check settings in the environment of the cluster's GCS process."""
    (gcs,) = [p for p in psutil.process_iter(["cmdline"]) if (cmd := p.info["cmdline"])
              and cmd[0].endswith("gcs_server") and any(cluster_dir in a for a in cmd)]
    env = gcs.environ()
    return {k: env.get(k) for k in node_health.ENV}


def _defaults(uid: int, user: str) -> tuple[str, str]:
    """RAY_PORT and CLUSTER_DIR the script picks for a user (its settings lines, run with
    `id` answering for that user)."""
    text = (SCRIPT.read_text().split("\nRAY_PORT=", 1)[1]).split("\nHERE=", 1)[0]
    shell = (f'id() {{ [ "$1" = -u ] && echo {uid} || echo {user}; }}\nRAY_PORT={text}\n'
             'echo "$RAY_PORT $CLUSTER_DIR"')
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_PORT", "CLUSTER_DIR")}
    out = subprocess.run(["bash", "-c", shell], env=env, capture_output=True, text=True)
    port, folder = out.stdout.split()
    return port, folder


def test_two_users_get_their_own_default_port_and_folder():
    alice, bob = _defaults(1000, "alice"), _defaults(1001, "bob")
    assert alice != bob and alice[1] == "/tmp/alignflow-cluster-alice"
    assert int(bob[0]) - int(alice[0]) >= 4  # four ports each: GCS, client, two agents
    assert all(20000 <= int(p) < 28000 for p, _ in (alice, bob))  # below the ephemeral range
