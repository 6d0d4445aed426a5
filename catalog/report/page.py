"""Assemble the report: run each registered panel and render one self-contained page."""

from __future__ import annotations

from datetime import UTC, datetime
from importlib import resources

import duckdb
from jinja2 import Environment

from alignflow.catalog.catalog import Catalog
from alignflow.catalog.report import html
from alignflow.catalog.report.data import RunData
from alignflow.catalog.report.panel import Panel
from alignflow.catalog.report.registry import PANELS, PanelFn
from alignflow.errors import AlignflowError


def _template():
    text = resources.files("alignflow.catalog.report").joinpath("page.html.jinja").read_text()
    return Environment(autoescape=True).from_string(text)


def _build(fn: PanelFn, run: RunData) -> Panel | None:
    """One panel; a query that fails leaves a one-line note instead of the whole report."""
    try:
        return fn(run)
    except (AlignflowError, duckdb.Error) as exc:
        title = (fn.__doc__ or fn.__name__).strip().splitlines()[0]
        return Panel(fn.__name__.replace("_", " "), html.alert(f"{title}: {exc}"))


def render_report(catalog: Catalog, run_id: str) -> str:
    """The HTML report of `run_id` (plots embedded as data URIs; no script, no link out)."""
    run = RunData(catalog, run_id)
    panels = [p for p in (_build(fn, run) for fn in PANELS) if p is not None]
    generated = datetime.fromtimestamp(run.generated, UTC).strftime("%Y-%m-%d %H:%M UTC")
    return _template().render(run_id=run_id, flow=run.run.get("flow"),
                              status=run.run.get("status"), generated=generated,
                              store=catalog.store.url, panels=panels)
