"""The held-out correctness curve of an RL run: the share of exactly correct answers at
each evaluation (iteration -1: before the first), from `eval/*/correct` — the number a
run is judged by, apart from the reward, which may pay for format too."""

from __future__ import annotations

from alignflow.catalog.report import html, plots
from alignflow.catalog.report.data import RunData, names
from alignflow.catalog.report.panel import Panel

_SQL = ("SELECT iteration, datasource, avg(correct) AS correct, count(*) AS answers "
        "FROM eval_results WHERE run_id = ? GROUP BY ALL ORDER BY iteration, datasource")


def held_out_correctness(run: RunData) -> Panel | None:
    """One point per evaluation and data source; None when no reward source checks answers."""
    keys = sorted(k for k in run.metric_keys if k.startswith("eval/") and k.endswith("/correct"))
    if not keys:
        return None
    run.shown_metrics.update(keys)
    series = [run.metric(k) for k in keys]
    return Panel("Held-out correctness", html.img(plots.curves(series, "iteration"),
                                                  names(series)),
                 wide=True, sql=run.shown(_SQL),
                 note="exactly correct answers on eval.dataset (eval_results.correct); with "
                      "eval.temperature 0, greedy; iteration -1 is the policy before training")
