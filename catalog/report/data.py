"""What a report knows about one run: its record, and per-step series read with SQL.

Every number on the page comes from a catalog query here, so what the report shows is what
`alignflow sql` returns. A `Series` is a per-iteration (or per-step) summary with its
spread: the mean, the 10–90 % and 25–75 % ranges of the samples, and min/max.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from alignflow.artifacts.metric_names import axis
from alignflow.catalog.catalog import Catalog
from alignflow.errors import RunNotFound

_SPREAD_SQL = """
SELECT x, count(v) AS n, avg(v) AS mean, min(v) AS lo, max(v) AS hi,
       quantile_cont(v, [0.1, 0.25, 0.75, 0.9]) AS q
FROM (SELECT {x} AS x, CAST({expr} AS DOUBLE) AS v FROM {table} WHERE run_id = ?)
WHERE x IS NOT NULL AND v IS NOT NULL AND isfinite(v) GROUP BY x ORDER BY x"""
_METRIC_SQL = _SPREAD_SQL.format(x="step", expr="value", table="metrics").replace(
    "WHERE run_id = ?)", "WHERE run_id = ? AND key = ?)")


@dataclass
class Series:
    """One quantity per iteration/step: mean and spread (empty lists when no samples)."""

    name: str
    x: list[float] = field(default_factory=list)
    mean: list[float] = field(default_factory=list)
    lo: list[float] = field(default_factory=list)
    hi: list[float] = field(default_factory=list)
    q: list[list[float]] = field(default_factory=list)  # per x: p10, p25, p75, p90
    n: list[int] = field(default_factory=list)

    @property
    def has_spread(self) -> bool:
        return any(c > 1 for c in self.n)

    @property
    def constant(self) -> float | None:
        """The one value every sample had for the whole run (None: it varies, or none)."""
        values = self.lo + self.hi
        if not values or max(values) - min(values) > 1e-12 * max(1.0, max(map(abs, values))):
            return None
        return values[0]

    @property
    def informative(self) -> bool:
        """Worth a plot: values at two or more points, not one constant for the whole run."""
        if len(self.x) < 2 and not self.has_spread:
            return False
        values = self.lo + self.hi
        return bool(values) and max(values) - min(values) > 1e-12 * max(1.0, max(map(abs, values)))


def names(series: list[Series]) -> str:
    """The plotted quantities, for an image's alt text."""
    return ", ".join(s.name for s in series)


def constants(series: list[Series]) -> str:
    """`reward: constant 0.0, KL: constant 0.0` for the series that never changed (they
    are said, not drawn: a flat line says less than the number)."""
    return ", ".join(f"{s.name}: constant {s.constant:g}" for s in series
                     if s.constant is not None and len(s.x) > 1)


class RunData:
    """The run's record and task rows, plus query helpers that bind its id."""

    def __init__(self, catalog: Catalog, run_id: str) -> None:
        self.catalog, self.run_id = catalog, run_id
        runs = catalog.sql("SELECT * FROM runs WHERE run_id = ?", [run_id]).to_pylist()
        self.tasks = catalog.sql("SELECT * FROM tasks WHERE run_id = ? ORDER BY started, "
                                 "task_key", [run_id]).to_pylist()
        if not runs and not self.tasks:
            raise RunNotFound(f"run {run_id!r} not found in store {catalog.store.url}; "
                              "`alignflow ls` lists the runs")
        self.run: dict[str, Any] = runs[0] if runs else {"run_id": run_id}
        self.generated = time.time()
        self.shown_metrics: set[str] = set()  # metric keys a panel has plotted already

    def rows(self, query: str, *params: Any) -> list[dict[str, Any]]:
        """`query` with the run id bound to its first `?`."""
        return self.catalog.sql(query, [self.run_id, *params]).to_pylist()

    @cached_property
    def counts(self) -> dict[str, int]:
        """Rows this run has in each sample table (0 where the table has none)."""
        out = {}
        for table in ("rollouts", "preferences", "sft_samples", "metrics"):
            out[table] = self.rows(f"SELECT count(*) AS n FROM {table} WHERE run_id = ?")[0]["n"]
        return out

    @cached_property
    def metric_axes(self) -> dict[str, str]:
        """Metric key -> what its `step` counts: "iteration" or "optimizer step"."""
        rows = self.rows("SELECT key, any_value(task_key) AS task FROM metrics WHERE "
                         "run_id = ? GROUP BY key ORDER BY key")
        return {r["key"]: "iteration" if axis(r["key"], r["task"] or "") == "iteration"
                else "optimizer step" for r in rows}

    @property
    def metric_keys(self) -> list[str]:
        return list(self.metric_axes)

    def spread(self, name: str, table: str, expr: str, x: str) -> Series:
        """Per-`x` summary of `expr` over the run's rows of `table` (code constants only)."""
        query = _SPREAD_SQL.format(x=x, expr=expr, table=table)
        return _series(name, self.rows(query))

    def metric(self, key: str, name: str | None = None) -> Series:
        """Per-step summary of one metric key (spread where a step has several rows)."""
        return _series(name or key, self.rows(_METRIC_SQL, key))

    def spread_sql(self, table: str, expr: str, x: str) -> str:
        """The query behind `spread`, as shown on the page."""
        return self.shown(_SPREAD_SQL.format(x=x, expr=expr, table=table))

    def shown(self, query: str) -> str:
        """`query` on one line with this run's id in place of its `?` / `$1` (to copy into
        `alignflow sql`)."""
        literal = "'" + self.run_id.replace("'", "''") + "'"
        return " ".join(query.split()).replace("$1", literal).replace("?", literal, 1)


def _series(name: str, rows: list[dict[str, Any]]) -> Series:
    s = Series(name)
    for r in rows:
        if r["mean"] is None or not math.isfinite(r["mean"]):
            continue
        s.x.append(float(r["x"]))
        s.mean.append(r["mean"])
        s.lo.append(r["lo"])
        s.hi.append(r["hi"])
        s.q.append(list(r["q"]))
        s.n.append(r["n"])
    return s
