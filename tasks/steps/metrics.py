"""The `metrics` table: one row per (step, key), written by every training step.

RL steps write one row per key at their iteration; offline and loop training write one row
per optimizer step and key (`train/*`, `eval/*`). `step` is what the metric is plotted
against (`metric_names.axis`); the task key says which task wrote it.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

import pyarrow as pa

from alignflow.artifacts.metric_names import canonical
from alignflow.artifacts.parquet_io import ArtifactRef
from alignflow.artifacts.schemas import METRICS


def write_metrics(scope, by_step: Iterable[tuple[int, Mapping[str, float]]], *,
                  prefix: str = "", partition: dict | None = None) -> ArtifactRef | None:
    """Stage one `metrics` file of `(step, {key: value})` pairs (keys get `prefix`, then
    their name in the one namespace: `artifacts/metric_names.py`)."""
    rows = [(int(step), canonical(f"{prefix}{k}"), float(v))
            for step, values in by_step for k, v in sorted(values.items())]
    if not rows:
        return None
    steps, keys, values = zip(*rows, strict=True)
    now = time.time()
    return scope.write(METRICS, pa.table({
        "run_id": [scope.run_id] * len(rows), "task_key": [scope.task_key] * len(rows),
        "step": list(steps), "key": list(keys), "value": list(values),
        "ts": [now] * len(rows)}), partition=partition)
