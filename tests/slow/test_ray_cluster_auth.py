"""`--address` against a cluster started with `ray start --head` (loopback, its own HOME):
Ray >= 2.59 turns token auth on there when a token exists, and a client given an explicit
address must send it; alignflow does so out of the box. Every process the cluster started
is stopped by pid at the end (never `ray stop`, which would stop other Ray instances)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import uuid

import psutil
import pytest

from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from alignflow.flows.journal import runs

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RAY = os.path.join(os.path.dirname(sys.executable), "ray")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cluster_processes(temp_dir: str, port: int) -> list[psutil.Process]:
    """The head's processes (their command lines name its temp dir or port) and children."""
    found: dict[int, psutil.Process] = {}
    for proc in psutil.process_iter(["cmdline"]):
        line = " ".join(proc.info["cmdline"] or [])
        if temp_dir in line or ("ray.util.client.server" in line and f":{port}" in line):
            for p in [proc, *proc.children(recursive=True)]:
                found[p.pid] = p
    return list(found.values())


@pytest.fixture(scope="module")
def head(tmp_path_factory):
    home = tmp_path_factory.mktemp("home")
    temp_dir, port = f"/tmp/af-head-{uuid.uuid4().hex[:6]}", _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAY_")} | {"HOME": str(home)}
    subprocess.run([RAY, "get-auth-token", "--generate"], env=env, check=True,
                   capture_output=True, timeout=120)
    subprocess.run([RAY, "start", "--head", "--node-ip-address=127.0.0.1", f"--port={port}",
                    "--num-cpus=1", "--include-dashboard=false", f"--temp-dir={temp_dir}",
                    "--disable-usage-stats"], env=env, check=True, capture_output=True,
                   timeout=180)
    try:
        yield f"127.0.0.1:{port}", env
    finally:
        procs = _cluster_processes(temp_dir, port)
        for p in procs:
            p.terminate()
        _gone, alive = psutil.wait_procs(procs, timeout=10)
        for p in alive:
            p.kill()
        subprocess.run(["rm", "-rf", temp_dir], check=False)


def test_address_of_a_token_auth_cluster_works_out_of_the_box(head, tmp_path):
    address, env = head
    store = str(tmp_path / "store")
    proc = subprocess.run(
        [sys.executable, "-m", "alignflow.cli", "run", "tests.flows_for_tests:steps",
         "--set", f"dir={tmp_path}", "--set", "n=2", "--address", address, "--store", store,
         "--run-id", "c"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert f"alignflow: running on Ray cluster at {address}" in proc.stderr
    assert "Token authentication is enabled" not in proc.stderr  # Ray's CLI notice, muted
    assert api.get_status("c", store=Store.open(store)) == runs.SUCCESSFUL
