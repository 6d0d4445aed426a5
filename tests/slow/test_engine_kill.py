"""Kill the driver (SIGKILL) at seeded random points of a multi-iteration flow, resume, and
compare every committed byte with an uninterrupted run of the same seed.

8 kill points use the inline executor (the driver runs the tasks), 2 use Ray (the driver
starts its own in-process Ray; the whole process group is killed, Ray included).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

from alignflow.artifacts.store import Store
from alignflow.flows.control import api
from alignflow.flows.journal import runs

pytestmark = pytest.mark.slow

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLOW = "tests.flows_for_tests:training"
CFG = {"iters": 6, "pause": 0.25}
RNG = random.Random(20240601)
# (executor, anchor, delay): kill `delay` s after the run starts / after its first commit
KILLS = [("inline", "start", RNG.uniform(0.0, 1.0))] + \
        [("inline", "commit", RNG.uniform(0.0, 1.6)) for _ in range(7)] + \
        [("ray", "commit", RNG.uniform(0.0, 1.6)) for _ in range(2)]


def committed_bytes(store: Store, run_id: str) -> dict[str, list[bytes]]:
    """task key -> bytes of each file it committed (Parquet, then the checkpoint)."""
    out = {}
    for key, m in runs.read_manifests(store, run_id).items():
        files = [a["path"] for a in m["artifacts"]] + [m["checkpoint"]]
        out[key] = [store.read_bytes(p) for p in files]
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    from tests import flows_for_tests as F

    store = Store.open(str(tmp_path_factory.mktemp("ref") / "store"))
    output = api.run(F.training, CFG, store=store, run_id="kill", seed=11, executor="inline")
    return output, committed_bytes(store, "kill")


def _start_driver(store_url: str, executor: str) -> subprocess.Popen:
    args = [sys.executable, "-m", "alignflow.cli", "run", FLOW, "--run-id", "kill",
            "--seed", "11", "--executor", executor, "--store", store_url,
            "--set", f"iters={CFG['iters']}", "--set", f"pause={CFG['pause']}"]
    env = dict(os.environ, ALIGNFLOW_LEASE_TTL="30")
    return subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)


def _kill_at(proc: subprocess.Popen, store: Store, anchor: str, delay: float) -> None:
    """SIGKILL the driver's process group `delay` s after its run.json / first commit."""
    deadline = time.time() + 60
    rel = runs.run_json("kill") if anchor == "start" else runs.manifest_path("kill", "iter-0000/train")
    while not store.exists(rel) and proc.poll() is None:
        assert time.time() < deadline, "driver never started"
        time.sleep(0.02)
    time.sleep(delay)
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()


@pytest.mark.parametrize(("executor", "anchor", "delay"), KILLS,
                         ids=[f"{e}-{a}+{d:.2f}s" for e, a, d in KILLS])
def test_kill_and_resume_gives_identical_bytes(tmp_path, reference, executor, anchor, delay,
                                               request):
    if executor == "ray":
        request.getfixturevalue("ray_local")
    store = Store.open(str(tmp_path / "store"))
    _kill_at(_start_driver(store.url, executor), store, anchor, delay)
    print(f"killed after {len(runs.read_manifests(store, 'kill'))} commits")
    if api.get_status("kill", store=store) != runs.SUCCESSFUL:
        output = api.resume("kill", store=store)  # the lease's owner provably died
    else:
        output = api.get_output("kill", store=store)
    ref_output, ref_bytes = reference
    assert output == ref_output
    assert committed_bytes(store, "kill") == ref_bytes
    assert len(ref_bytes) == CFG["iters"]
