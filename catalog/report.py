"""A run report: Markdown with PNG plots, all from catalog SQL.

`report.md` holds the run record, task counts, mean reward per iteration and the last value
of each metric; `reward.png` and `metrics.png` plot them. Everything comes from the views,
so a report can be made for any run in any store, long after the run.
"""

from __future__ import annotations

import os
from pathlib import Path

import pyarrow as pa

from alignflow.catalog.catalog import Catalog
from alignflow.errors import RunNotFound

MAX_METRIC_PLOTS = 12

_REWARD_SQL = """
SELECT iteration, avg(reward) AS mean_reward, count(*) AS samples
FROM rollouts WHERE run_id = ? AND reward IS NOT NULL
GROUP BY iteration ORDER BY iteration"""
_METRICS_SQL = """
SELECT key, step, avg(value) AS value FROM metrics
WHERE run_id = ? AND value IS NOT NULL GROUP BY key, step ORDER BY key, step"""
_TASKS_SQL = """
SELECT task, status, count(*) AS n, round(sum(duration), 3) AS seconds, sum(rows) AS rows
FROM tasks WHERE run_id = ? GROUP BY task, status ORDER BY min(started), task"""


def write_report(catalog: Catalog, run_id: str, out_dir: str | os.PathLike) -> Path:
    """Write `report.md` (+ PNGs) for `run_id` into `out_dir`; return the Markdown path."""
    run = catalog.sql("SELECT * FROM runs WHERE run_id = ?", [run_id]).to_pylist()
    tasks = catalog.sql(_TASKS_SQL, [run_id])
    if not run and tasks.num_rows == 0:
        raise RunNotFound(f"run {run_id!r} not found in store {catalog.store.url}; "
                          "`alignflow ls` lists the runs")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    reward = catalog.sql(_REWARD_SQL, [run_id])
    metrics = catalog.sql(_METRICS_SQL, [run_id])
    parts = [f"# Run `{run_id}`\n", _run_section(run[0] if run else {}),
             "## Tasks\n", _markdown(tasks)]
    parts += ["## Mean reward per iteration\n", _markdown(reward)]
    if reward.num_rows and _plot_reward(reward, out / "reward.png"):
        parts.append("![mean reward per iteration](reward.png)\n")
    parts.append("## Metrics\n")
    keys = sorted(set(metrics.column("key").to_pylist()), key=_plot_order)[:MAX_METRIC_PLOTS]
    if keys and _plot_metrics(metrics, keys, out / "metrics.png"):
        parts.append("![metrics over steps](metrics.png)\n")
    parts.append(_markdown(_last_values(metrics)))
    path = out / "report.md"
    path.write_text("\n".join(parts), encoding="utf-8")
    return path


def _plot_order(key: str) -> tuple[int, str]:
    """Losses, KL and rewards first; then the rest by name."""
    first = next((i for i, w in enumerate(("loss", "kl", "reward")) if w in key.lower()), 3)
    return first, key


def _run_section(run: dict) -> str:
    fields = ("flow", "status", "seed", "parent_run", "code_version", "started", "ended",
              "duration")
    rows = [f"| {k} | {run.get(k)} |" for k in fields if run.get(k) is not None]
    return "\n".join(["| field | value |", "|---|---|", *rows, ""]) if rows else "_no run.json_\n"


def _markdown(table: pa.Table) -> str:
    """A GitHub-style Markdown table (no extra dependency)."""
    if table.num_rows == 0:
        return "_none_\n"
    head = "| " + " | ".join(table.column_names) + " |"
    rule = "|" + "---|" * table.num_columns
    body = ["| " + " | ".join(_cell(v) for v in row.values()) + " |"
            for row in table.to_pylist()]
    return "\n".join([head, rule, *body, ""])


def _cell(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v).replace("|", "\\|")


def _last_values(metrics: pa.Table) -> pa.Table:
    last: dict[str, tuple[int, float]] = {}
    for row in metrics.to_pylist():
        last[row["key"]] = (row["step"], row["value"])
    return pa.table({"key": list(last), "last_step": [s for s, _ in last.values()],
                     "last_value": [v for _, v in last.values()]})


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plot_reward(reward: pa.Table, path: Path) -> bool:
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(reward.column("iteration").to_pylist(), reward.column("mean_reward").to_pylist(),
            marker="o")
    ax.set_xlabel("iteration")
    ax.set_ylabel("mean reward")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def _plot_metrics(metrics: pa.Table, keys: list[str], path: Path) -> bool:
    plt = _pyplot()
    cols = min(3, len(keys))
    nrows = (len(keys) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(4 * cols, 2.8 * nrows), squeeze=False)
    rows = metrics.to_pylist()
    for ax, key in zip(axes.flat, keys, strict=False):
        pts = [(r["step"], r["value"]) for r in rows if r["key"] == key]
        ax.plot([s for s, _ in pts], [v for _, v in pts], marker=".")
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(keys):]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True
