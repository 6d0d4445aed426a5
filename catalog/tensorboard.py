"""A run's metrics as TensorBoard event files, straight from the store.

Steps commit their metrics as rows (`metrics`, in the one namespace of
`artifacts/metric_names.py`: the reward's mean is the score step's `rollout/reward_mean`),
so a run needs no live logger: `alignflow report RUN_ID --tensorboard DIR` writes one
scalar series per metric key, and `tensorboard --logdir DIR` shows them — for any run,
finished, killed or resumed, and without duplicate points from retried tasks (only
committed rows exist).
"""

from __future__ import annotations

from pathlib import Path

_METRICS = "SELECT key, step, value FROM metrics WHERE run_id = ? ORDER BY key, step, ts"


def export_tensorboard(catalog, run_id: str, logdir: str | Path) -> int:
    """Writes the run's scalars under `logdir/run_id`; returns how many points it wrote."""
    from torch.utils.tensorboard import SummaryWriter

    points = 0
    with SummaryWriter(log_dir=str(Path(logdir) / run_id)) as writer:
        for row in catalog.sql(_METRICS, [run_id]).to_pylist():
            if row["value"] is not None:
                writer.add_scalar(row["key"], row["value"], int(row["step"]))
                points += 1
    return points
