"""The S3 endpoint (moto's server) stops for 30 s in the middle of a run and comes back:
the driver and its tasks wait (store retries), the run completes, and every task's rows
are there exactly once (SQL over the committed files)."""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid

import pytest

from alignflow.artifacts.store import Store
from alignflow.catalog import Catalog
from alignflow.flows.control import api
from alignflow.flows.journal import runs
from tests import flows_for_tests as F

pytestmark = pytest.mark.slow

OUTAGE_S = 30.0
ITERS = 8


def _moto(port: int):
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server


@pytest.fixture
def endpoint(s3_server, monkeypatch):
    """A moto server of this test's own (the session's keeps running), on a fixed port so it
    can be stopped and started again; moto keeps its buckets in the process meanwhile."""
    logging.getLogger("werkzeug").setLevel(logging.ERROR)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    box = {"server": _moto(port)}
    yield f"http://127.0.0.1:{port}", port, box
    box["server"].stop()


def test_a_30s_outage_mid_run_is_ridden_out(endpoint, tmp_path):
    url, port, box = endpoint
    import s3fs

    bucket = f"af-{uuid.uuid4().hex[:12]}"
    s3fs.S3FileSystem(endpoint_url=url, skip_instance_cache=True).mkdir(bucket)
    store = Store.open(f"s3://{bucket}/outage", storage_options={"endpoint_url": url})
    result: dict = {}

    def drive():
        try:
            result["out"] = api.run(F.training, {"iters": ITERS, "pause": 0.5}, store=store,
                                    run_id="o", seed=3, executor="inline")
        except BaseException as exc:
            result["error"] = exc

    driver = threading.Thread(target=drive)
    driver.start()
    probe = Store.open(f"s3://{bucket}/outage", storage_options={"endpoint_url": url})
    deadline = time.time() + 120
    while not probe.exists(runs.manifest_path("o", "iter-0001/train")):
        assert time.time() < deadline and driver.is_alive(), result
        time.sleep(0.1)
    box["server"].stop()
    time.sleep(OUTAGE_S)
    assert driver.is_alive(), f"the run ended during the outage: {result}"
    box["server"] = _moto(port)
    driver.join(timeout=300)
    assert "error" not in result, result.get("error")
    assert api.get_status("o", store=probe) == runs.SUCCESSFUL
    with Catalog(probe) as cat:
        rows = cat.sql("SELECT task_key, count(*) AS n FROM metrics GROUP BY 1 ORDER BY 1")
        tasks = cat.sql("SELECT count(*) AS n, max(attempts) AS attempts FROM tasks "
                        "WHERE run_id = 'o'")
    assert rows.column("task_key").to_pylist() == [f"iter-{i:04d}/train" for i in range(ITERS)]
    assert rows.column("n").to_pylist() == [1] * ITERS  # nothing lost, nothing doubled
    # one attempt each: the store waited out the outage, no task had to be run again
    assert tasks.to_pylist() == [{"n": ITERS, "attempts": 1}]
