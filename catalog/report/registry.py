"""The report's panels, in page order: each one small function `RunData -> Panel | None`.

A panel returns None when it has nothing to show for this run (no rows, or a quantity the
run's algorithm keeps constant), so empty panels are left out rather than drawn. To add a
panel (staleness, campaign lineage, ...), write the function in its own module and put it
in `PANELS` where it should appear.
"""

from __future__ import annotations

from collections.abc import Callable

from alignflow.catalog.report import (
    panels_async,
    panels_campaign,
    panels_eval,
    panels_offline,
    panels_rl,
    panels_run,
)
from alignflow.catalog.report.data import RunData
from alignflow.catalog.report.panel import Panel

PanelFn = Callable[[RunData], Panel | None]

PANELS: list[PanelFn] = [
    panels_run.overview,
    panels_campaign.campaign_parent,
    panels_campaign.campaign_rounds,
    panels_rl.learning_curves,
    panels_offline.learning_curves,
    panels_rl.reward_histograms,
    panels_rl.evaluation,
    panels_eval.held_out_correctness,
    panels_async.staleness,
    panels_offline.margin_histograms,
    panels_run.step_times,
    panels_run.other_metrics,
    panels_rl.samples,
    panels_offline.hardest_examples,
    panels_run.config,
]
