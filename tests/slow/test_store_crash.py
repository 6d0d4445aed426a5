"""Crash safety: a writer SIGKILLed mid-write leaves nothing visible; the rerun commits once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from alignflow.artifacts import committed_files, read_table
from alignflow.artifacts.commit import load_manifest

pytestmark = pytest.mark.slow

BATCHES, ROWS = 40, 2000

CHILD = f"""
import json, sys, time
import numpy as np, pyarrow as pa
from alignflow.artifacts import Store, commit, write_table
from alignflow.errors import CommitConflict
url, options, mode, marker = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3], sys.argv[4]
store = Store.open(url, storage_options=options)
def batches():
    rng = np.random.default_rng(0)
    for i in range({BATCHES}):
        ids = pa.ListArray.from_arrays(np.arange(0, {ROWS} * 128 + 1, 128, dtype=np.int32),
                                       pa.array(rng.integers(0, 5000, {ROWS} * 128, dtype=np.int32)))
        yield pa.table({{"iteration": pa.array([1] * {ROWS}, pa.int32()),
                        "task_key": ["iter-1/gen"] * {ROWS},
                        "prompt_id": [f"p{{i}}-{{j}}" for j in range({ROWS})],
                        "sample_idx": pa.array([0] * {ROWS}, pa.int32()),
                        "response_ids": ids}})
        if i == 3:
            open(marker, "w").close()
        if mode == "slow":
            time.sleep(0.2)
ref = write_table(store, "rollouts", batches(), run_id="r", task="gen", partition={{"iter": 1}})
try:
    commit(store, "r", "iter-1/gen", {{"artifacts": [ref]}})
except CommitConflict as exc:
    print(exc)
    sys.exit(3)
"""


def _child(store, mode: str, marker: str) -> subprocess.Popen:
    args = [sys.executable, "-c", CHILD, store.url, json.dumps(store.storage_options), mode,
            marker]
    return subprocess.Popen(args, env=os.environ | {"OMP_NUM_THREADS": "1"},
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(params=["local", "s3"])
def crash_store(request):
    return request.getfixturevalue(f"{request.param}_store")


def test_sigkill_mid_write_then_rerun_commits_once(crash_store, tmp_path):
    marker = str(tmp_path / "started")
    proc = _child(crash_store, "slow", marker)
    deadline = time.time() + 60
    while not os.path.exists(marker):
        assert proc.poll() is None and time.time() < deadline, proc.stdout.read()
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert committed_files(crash_store) == []
    assert load_manifest(crash_store, "r", "iter-1/gen") is None
    leftovers = crash_store.list("runs")
    assert all(p.rsplit("/", 1)[1].startswith(".") for p in leftovers), leftovers
    if crash_store.protocol == "s3":
        assert leftovers == []  # nothing was uploaded before the file was complete

    first = _child(crash_store, "fast", marker)
    assert first.wait(timeout=300) == 0, first.stdout.read()
    second = _child(crash_store, "fast", marker)
    assert second.wait(timeout=300) == 3
    assert "already committed" in second.stdout.read()
    refs = committed_files(crash_store)
    assert len(refs) == 1 and refs[0].rows == BATCHES * ROWS
    table = read_table(crash_store, refs, columns=["prompt_id", "response_ids"])
    assert table.num_rows == BATCHES * ROWS
    assert table.column("prompt_id")[ROWS * 3 + 7].as_py() == "p3-7"
    assert len(table.column("response_ids")[0].as_py()) == 128
