"""The engine on an S3 store (moto's HTTP server): commit, crash, resume, lease, events."""

from __future__ import annotations

import pytest

from alignflow.flows.control import api
from alignflow.flows.journal import runs
from alignflow.flows.journal.lease import lease_expired
from tests import flows_for_tests as F

pytestmark = pytest.mark.slow


def test_run_crash_resume_on_s3(s3_store, tmp_path):
    folder = str(tmp_path)
    out = api.run(F.steps, {"dir": folder, "n": 3}, store=s3_store, run_id="r",
                  executor="inline")
    assert out == [F.StepOut(i, i * 1.5) for i in range(3)]
    assert sorted(runs.read_manifests(s3_store, "r")) == ["step-0", "step-1", "step-2"]
    assert lease_expired(s3_store, "r")  # released at the end
    s3_store.delete(runs.manifest_path("r", "step-2"))
    runs.update_run(s3_store, "r", status=runs.RUNNING)
    assert api.get_status("r", store=s3_store) == runs.RESUMABLE
    assert api.resume("r", store=s3_store) == out
    assert [F.count(folder, f"step-{i}") for i in range(3)] == [1, 1, 2]


def test_events_and_tick_on_s3(s3_store, tmp_path):
    api.run(F.waiting, {"dir": str(tmp_path)}, store=s3_store, run_id="w", executor="inline",
            block=False)
    assert api.get_status("w", store=s3_store) == runs.SLEEPING
    api.send_event("w", "approve", [1, 2], store=s3_store)
    assert api.tick(s3_store) == {"w": "SUCCESSFUL"}
    assert api.get_output("w", store=s3_store) == {"payload": [1, 2]}
