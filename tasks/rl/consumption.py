"""Which learn step consumed which samples, and how stale they were. Commits:
rollout_consumption (one row per sample a learn step trained on).

Staleness = the learner's policy version when it consumes a sample minus the version that
sampled the sample's oldest token: 0 in a synchronous run, up to `async.max_staleness`
in an asynchronous one. With the journal this answers, in SQL, "how stale was the data
each step learned from" and "was any batch lost or consumed twice".
"""

from __future__ import annotations

import pyarrow as pa

from alignflow.tasks.rl.experience import Experience
from alignflow.tasks.steps.tables import CONSUMPTION


def staleness(exp: Experience, learner_version: int) -> list[int]:
    """Per sample: learner version − policy version of its oldest token (0 if unrecorded)."""
    versions = exp.versions or [None] * len(exp.responses)
    return [learner_version - (learner_version if v is None else int(v)) for v in versions]


def consumption_table(exp: Experience, task_key: str, step: int,
                      learner_version: int) -> pa.Table:
    n = len(exp.responses)
    return pa.table({
        "run_id": exp.keys.column("run_id"), "iteration": exp.keys.column("iteration"),
        "task_key": [task_key] * n,
        "prompt_id": exp.keys.column("prompt_id"), "sample_idx": exp.keys.column("sample_idx"),
        "consumed_at_step": pa.array([step] * n, pa.int32()),
        "learner_version": pa.array([learner_version] * n, pa.int32()),
        "staleness": pa.array(staleness(exp, learner_version), pa.int32()),
    }, schema=CONSUMPTION.arrow_schema)


def staleness_metrics(exp: Experience, learner_version: int) -> dict[str, float]:
    """The batch's staleness and the versions that sampled it (in the learn manifest's
    output, so the journal says under which weights each step's data was generated)."""
    values = staleness(exp, learner_version)
    versions = [learner_version - v for v in values]
    return {"staleness_mean": sum(values) / max(len(values), 1),
            "staleness_max": float(max(values, default=0)),
            "batch_version_min": float(min(versions, default=learner_version)),
            "batch_version_max": float(max(versions, default=learner_version))}
