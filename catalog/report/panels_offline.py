"""Panels of offline runs (sft, dpo, rm, kto, ...): per-sample rows in `preferences` and
`sft_samples`, summarised per training step."""

from __future__ import annotations

from alignflow.catalog.report import html, plots
from alignflow.catalog.report.data import RunData, Series, names
from alignflow.catalog.report.panel import Panel
from alignflow.catalog.report.panels_rl import first_and_last

# (title, table, per-sample expression)
_SAMPLE_SERIES = (
    ("loss", "preferences", "loss"),
    ("margin (chosen − rejected)", "preferences", "margin"),
    ("accuracy (margin > 0)", "preferences", "CAST(margin > 0 AS DOUBLE)"),
    ("chosen score", "preferences", "chosen_score"),
    ("rejected score", "preferences", "rejected_score"),
    ("loss", "sft_samples", "loss"),
    ("tokens per sample", "sft_samples", "n_tokens"),
)
_EVAL_KEYS = ("eval/loss", "eval/accuracy", "eval/margin")
_HARDEST = 8


def _series(run: RunData) -> list[Series]:
    out = [run.spread(title, table, expr, "step") for title, table, expr in _SAMPLE_SERIES
           if run.counts[table]]
    if run.counts["preferences"]:
        run.shown_metrics.update({"train/loss", "train/margin", "train/accuracy",
                                  "train/chosen_reward", "train/rejected_reward"})
    if run.counts["sft_samples"]:
        run.shown_metrics.add("train/loss")
    for key in _EVAL_KEYS:
        if key in run.metric_keys:
            run.shown_metrics.add(key)
            out.append(run.metric(key))
    return [s for s in out if s.informative]


def learning_curves(run: RunData) -> Panel | None:
    """Loss, margin, accuracy and scores per training step, with the spread over samples."""
    if not (run.counts["preferences"] or run.counts["sft_samples"]):
        return None
    series = _series(run)
    if not series:
        return None
    table = "preferences" if run.counts["preferences"] else "sft_samples"
    return Panel("Learning curves", html.img(plots.curves(series, "step"), names(series)),
                 wide=True, sql=run.spread_sql(table, "loss", "step"),
                 note="line: mean per step; bands: 25–75 % and 10–90 % of the step's samples "
                      "(eval/*: one value per evaluation)")


def margin_histograms(run: RunData) -> Panel | None:
    """Preference margins at the first and the last training step."""
    if not run.counts["preferences"]:
        return None
    groups = first_and_last(run, "preferences", "margin", "step")
    if groups is None:
        return None
    return Panel("Margin: first vs last step",
                 html.img(plots.histograms(groups, "margin (chosen − rejected)"), "margins"))


def hardest_examples(run: RunData) -> Panel | None:
    """The highest-loss pairs or samples of the last training step."""
    table = next((t for t in ("preferences", "sft_samples") if run.counts[t]), None)
    if table is None:
        return None
    cols = ("prompt, chosen, rejected, margin" if table == "preferences"
            else "prompt, response, n_tokens")
    query = (f"SELECT step, {cols}, loss FROM {table} WHERE run_id = $1 AND step = (SELECT "
             f"max(step) FROM {table} WHERE run_id = $1) AND loss IS NOT NULL "
             f"ORDER BY loss DESC LIMIT {_HARDEST}")
    rows = run.rows(query)
    if not rows:
        return None
    names = list(rows[0])
    body = html.table(names, [[html.text(r[n], 300) if isinstance(r[n], str) else r[n]
                               for n in names] for r in rows], "samples")
    return Panel("Hardest examples of the last step", body, wide=True,
                 sql=run.shown(query), note="highest loss first")
