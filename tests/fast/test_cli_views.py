"""`alignflow status` shows journalled records readably, not as tagged JSON."""

from __future__ import annotations

from alignflow.artifacts.parquet_io import ArtifactRef
from alignflow.flows.cli.views import summarize
from alignflow.flows.journal import codec
from alignflow.tasks.steps.records import StepOutput


def test_records_and_refs_read_like_python():
    ref = ArtifactRef(table="rollouts", path="runs/r/rollouts/x.parquet", rows=16,
                      schema="rollouts", schema_version="1.0", bytes=10)
    out = codec.encode(StepOutput((ref,), 16, {"reward_mean": 0.5}))
    assert summarize(out, width=200) == (
        'StepOutput(refs=["<rollouts: 16 rows>"], rows=16, metrics={"reward_mean":0.5})')
    assert summarize({"policy_version": 3}) == '{"policy_version":3}'
    assert summarize(out, width=20) == "StepOutput(refs=[..."
