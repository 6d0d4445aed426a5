"""`alignflow report RUN1 RUN2 ...`: several runs on the same axes (seeds, estimators, a
run before and after a change), and a table of how their configs differ.

Each quantity gets one small plot with a line per run (its mean per iteration or step):
the reward of RL runs (from `rollouts`), the per-sample loss of offline runs, then every
metric key the runs share and that moves. Configs are compared key by key; keys that are
equal in every run are left out.
"""

from __future__ import annotations

from datetime import UTC, datetime

from alignflow.catalog.catalog import Catalog
from alignflow.catalog.report import html, plots
from alignflow.catalog.report.data import RunData, Series
from alignflow.catalog.report.page import _template
from alignflow.catalog.report.panel import Panel
from alignflow.catalog.report.panels_run import _flatten, _json, elapsed_text
from alignflow.errors import ConfigError

MAX_PLOTS = 15
FIRST = ("train/policy_loss", "train/loss", "eval/loss", "train/kl", "train/entropy",
         "eval/accuracy", "train/accuracy", "rollout/response_len_mean")
ORDER = ("train/", "eval/", "rollout/", "data/", "perf/")
_SAMPLES = (("reward", "rollouts", "reward", "iteration"),
            ("loss (per sample)", "preferences", "loss", "step"),
            ("loss (per sample)", "sft_samples", "loss", "step"))


def render_comparison(catalog: Catalog, run_ids: list[str]) -> str:
    """One page comparing `run_ids` (two or more, each named once)."""
    if len(set(run_ids)) != len(run_ids) or len(run_ids) < 2:
        raise ConfigError(f"report: compare two or more different runs; got {run_ids}")
    runs = [RunData(catalog, r) for r in run_ids]
    panels = [_overview(runs), _curves(runs), _config_diff(runs)]
    generated = datetime.fromtimestamp(runs[0].generated, UTC).strftime("%Y-%m-%d %H:%M UTC")
    statuses = ", ".join(sorted({str(r.run.get("status")) for r in runs}))
    return _template().render(run_id=" vs ".join(run_ids), flow=f"{len(runs)} runs compared",
                              status=statuses, generated=generated, store=catalog.store.url,
                              panels=[p for p in panels if p is not None])


def _overview(runs: list[RunData]) -> Panel:
    rows = [(r.run_id, r.run.get("flow"), r.run.get("status"), r.run.get("seed"),
             elapsed_text(r), r.run.get("drivers") or "—") for r in runs]
    return Panel("Runs", html.table(["run", "flow", "status", "seed", "duration", "drives"],
                                    rows),
                 wide=True, note="each run's color in the plots follows this order")


def _quantities(runs: list[RunData]) -> list[tuple[str, str, list[Series | None]]]:
    """(title, x axis, one series per run) of what the runs have to compare."""
    out = []
    for title, table, expr, x in _SAMPLES:
        if any(r.counts[table] for r in runs):
            out.append((title, x, [r.spread(title, table, expr, x) if r.counts[table] else None
                                   for r in runs]))
    seen = {_shape(per_run) for _, _, per_run in out}
    for key in sorted({k for r in runs for k in r.metric_keys}, key=_rank):
        found = [r.metric(key) if key in r.metric_axes else None for r in runs]
        if any(s is not None and s.informative for s in found) and _shape(found) not in seen:
            seen.add(_shape(found))  # the same numbers under another name: drawn once
            axis = next(r.metric_axes[key] for r in runs if key in r.metric_axes)
            out.append((key, axis, found))
    return out


def _rank(key: str) -> tuple:
    """Learning curves first, then by namespace (train, eval, rollout, data, perf)."""
    first = FIRST.index(key) if key in FIRST else len(FIRST)
    space = next((i for i, p in enumerate(ORDER) if key.startswith(p)), len(ORDER))
    return first, space, key


def _shape(per_run: list[Series | None]) -> tuple:
    return tuple(None if s is None else (tuple(s.x), tuple(float(f"{v:.4g}") for v in s.mean))
                 for s in per_run)


def _curves(runs: list[RunData]) -> Panel | None:
    found = _quantities(runs)
    if not found:
        return None
    shown = found[:MAX_PLOTS]
    labels = [r.run_id for r in runs]
    body = html.img(plots.overlay(shown, labels), ", ".join(t for t, _, _ in shown))
    more = f"; {len(found) - MAX_PLOTS} more in the `metrics` view" if found[MAX_PLOTS:] else ""
    return Panel("Curves", body, wide=True,
                 note=f"one line per run: its mean per iteration or step{more}"
                      f"{_coinciding_note(shown, labels)}")


def _coinciding_note(shown: list[tuple[str, str, list[Series | None]]],
                     labels: list[str]) -> str:
    """`; lines that coincide (dashed, markers on alternate points): reward (a = b)`."""
    said = [f"{title} ({' = '.join(labels[i] for i in group)})"
            for title, _, per_run in shown for group in plots.coinciding(per_run)]
    if not said:
        return ""
    return "; lines that coincide (drawn dashed, markers on alternate points): " + \
        ", ".join(said)


def _config_diff(runs: list[RunData]) -> Panel | None:
    flat = [dict(_flatten(_json(r.run.get("config")) or {})) for r in runs]
    keys = sorted({k for f in flat for k in f})
    rows = [(k, *[f.get(k, "—") for f in flat]) for k in keys
            if len({repr(f.get(k, "—")) for f in flat}) > 1]
    note = f"{len(rows)} of {len(keys)} keys differ" if rows else "the configs are equal"
    body = html.table(["key", *[r.run_id for r in runs]], rows) if rows else html.note("")
    return Panel("Config differences", body, wide=True, note=note)


def default_out(run_ids: list[str]) -> str:
    """`report-A-vs-B.html` (`report-A-vs-2-more.html` past two runs)."""
    rest = run_ids[1] if len(run_ids) == 2 else f"{len(run_ids) - 1}-more"
    return f"report-{run_ids[0]}-vs-{rest}.html"

