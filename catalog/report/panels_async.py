"""The staleness panel of asynchronous RL runs: how old the data each learn step consumed
was, in policy versions (from the `rollout_consumption` table the learn steps commit)."""

from __future__ import annotations

from alignflow.catalog.report import html, plots
from alignflow.catalog.report.data import RunData
from alignflow.catalog.report.panel import Panel

_STALENESS_SQL = """
SELECT consumed_at_step AS step, staleness, count(*) AS n FROM rollout_consumption
WHERE run_id = ? GROUP BY ALL ORDER BY ALL"""
_STALE_BATCHES = ("rollout/dropped_batches", "rollout/regenerated_batches")
_SHOWN = ("staleness_mean", "staleness_max", "batch_version_min", "batch_version_max",
          *_STALE_BATCHES, "stale_batch_staleness")


def staleness(run: RunData) -> Panel | None:
    """Samples per learn step by staleness; batches dropped or regenerated as too stale."""
    if "rollout_consumption" not in run.catalog.tables():
        return None
    rows = run.rows(_STALENESS_SQL)
    if not rows or all(r["staleness"] == 0 for r in rows):
        return None  # synchronous: every sample was learned by the policy that sampled it
    run.shown_metrics.update(_SHOWN)
    steps = sorted({r["step"] for r in rows})
    levels = sorted({r["staleness"] for r in rows})
    counts = {(r["step"], r["staleness"]): r["n"] for r in rows}
    parts = {f"{s} behind": [float(counts.get((x, s), 0)) for x in steps] for s in levels}
    chart = plots.stacked_bars(steps, parts, "learn step", ylabel="samples")
    stale = run.rows("SELECT key, count(*) AS n FROM metrics WHERE run_id = ? AND key IN "
                     f"{_STALE_BATCHES} GROUP BY key ORDER BY key")
    body = html.img(chart, "samples per learn step by staleness")
    if stale:
        body = html.join(body, html.table(["too stale", "batches"],
                                          [(r["key"][8:].replace("_batches", ""), r["n"])
                                           for r in stale]))
    return Panel("Staleness of the data each step learned from", body,
                 sql=run.shown(_STALENESS_SQL),
                 note="policy versions between the weights that sampled a sample's oldest "
                      "token and the learner's weights when it consumed the sample")
