"""Figures for the report, as PNG data URIs (the page is one self-contained file).

Matplotlib's object API (`Figure`, no pyplot) keeps this free of global state, so reports
can be drawn from any thread. Spread is drawn as bands: 10–90 % light, 25–75 % darker,
the mean as a line.

Axes say what the numbers are: no offset notation (`+6.9e-1` over the title), and a y
range of at least `MIN_SPAN` of the values' size, so a loss that moves by 0.05 % is drawn
flat, not as a cliff. Figures are cut to what they draw (titles, legends, labels whole).
"""

from __future__ import annotations

import base64
import io
import math
from collections.abc import Mapping, Sequence

from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import MaxNLocator

from alignflow.catalog.report.data import Series

COLORS = ("#2f6db5", "#d9822b", "#3a9a5b", "#b6443f", "#7c5cb5", "#8c6d3f", "#c45a9b",
          "#5f6b7a", "#a8a23a", "#2fa3a8")
_PANEL_W, _PANEL_H, _DPI = 3.7, 2.5, 110
MIN_SPAN = 0.05  # the least y range, as a share of the largest |value| drawn


def data_uri(fig: Figure) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=_DPI, bbox_inches="tight", pad_inches=0.08)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def _axes(n: int, ncols: int) -> tuple[Figure, list]:
    """A grid of `n` axes with fixed margins (a layout engine would draw everything twice)."""
    cols = max(1, min(ncols, n))
    rows = (n + cols - 1) // cols
    width, height = _PANEL_W * cols, _PANEL_H * rows
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=0.62 / width, right=1 - 0.15 / width, bottom=0.45 / height,
                        top=1 - 0.3 / height, wspace=0.8 / (_PANEL_W - 0.8),
                        hspace=0.9 / (_PANEL_H - 0.9))
    axes = fig.subplots(rows, cols, squeeze=False).flatten().tolist()
    for ax in axes[n:]:
        ax.set_visible(False)
    return fig, axes[:n]


def _single(width: float, height: float, top: float = 0.15) -> Figure:
    fig = Figure(figsize=(width, height))
    fig.subplots_adjust(left=0.7 / width, right=1 - 0.15 / width, bottom=0.5 / height,
                        top=1 - top / height)
    return fig


def y_limits(values: Sequence[float]) -> tuple[float, float] | None:
    """Wider y limits for values that barely move (None: matplotlib's own are honest)."""
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return None
    lo, hi = min(finite), max(finite)
    least = MIN_SPAN * max(abs(lo), abs(hi))
    if hi - lo >= least or least == 0:
        return None
    middle = (lo + hi) / 2
    return middle - least / 2, middle + least / 2


def _style(ax, title: str, xlabel: str, integer_x: bool = True) -> None:
    """Small type, light grid, no top/right frame; iterations and steps tick at integers."""
    ax.set_title(title, fontsize=10, loc="left")
    ax.set_xlabel(xlabel, fontsize=8)
    ax.tick_params(labelsize=8)
    ax.ticklabel_format(axis="y", useOffset=False)
    if integer_x:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.grid(alpha=0.25)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _with_gaps(x: list[float], *columns: Sequence[float]) -> list[list[float]]:
    """`x` and `columns` with a NaN row where x jumps by more than twice its usual step, so
    a missing stretch (left-out files, skipped steps) shows as a gap, not a straight line."""
    steps = sorted(b - a for a, b in zip(x, x[1:], strict=False))
    usual = steps[len(steps) // 2] if steps else 0.0
    out: list[list[float]] = [[] for _ in range(len(columns) + 1)]
    for i, xi in enumerate(x):
        if i and usual and xi - x[i - 1] > 2 * usual:
            for col in out:
                col.append(math.nan)
        out[0].append(xi)
        for col, values in zip(out[1:], columns, strict=True):
            col.append(values[i])
    return out


def curves(series: Sequence[Series], xlabel: str | Sequence[str], ncols: int = 3) -> str:
    """Small multiples: one axis per series, mean line over its spread bands; `xlabel`
    one for all, or one per series."""
    labels = [xlabel] * len(series) if isinstance(xlabel, str) else list(xlabel)
    fig, axes = _axes(len(series), ncols)
    for i, (ax, s) in enumerate(zip(axes, series, strict=True)):
        color = COLORS[i % len(COLORS)]
        x, mean, p10, p25, p75, p90 = _with_gaps(s.x, s.mean, *zip(*s.q, strict=True))
        if s.has_spread:
            ax.fill_between(x, p10, p90, color=color, alpha=0.13, linewidth=0)
            ax.fill_between(x, p25, p75, color=color, alpha=0.28, linewidth=0)
        ax.plot(x, mean, color=color, linewidth=1.6,
                marker="o" if len(s.x) <= 30 else None, markersize=3)
        _style(ax, s.name, labels[i])
        limits = y_limits([*s.lo, *s.hi, *s.mean])
        if limits is not None:
            ax.set_ylim(*limits)
        if len(s.x) == 1:
            ax.set_xticks(s.x)
    return data_uri(fig)


def histograms(groups: Sequence[tuple[str, Sequence[float]]], xlabel: str) -> str:
    """Overlaid histograms on shared bins (e.g. first vs last iteration)."""
    values = [v for _, vs in groups for v in vs]
    lo, hi = min(values), max(values)
    bins = 20 if hi > lo else 1
    fig = _single(_PANEL_W * 1.5, _PANEL_H * 1.2)
    ax = fig.subplots()
    for i, (label, vs) in enumerate(groups):
        ax.hist(vs, bins=bins, range=(lo, hi) if hi > lo else None, histtype="stepfilled",
                alpha=0.35, color=COLORS[i], edgecolor=COLORS[i], linewidth=1.2, label=label)
    _style(ax, "", xlabel, integer_x=False)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("samples", fontsize=8)
    ax.legend(fontsize=8, frameon=False)
    return data_uri(fig)


def stacked_bars(x: Sequence[int], parts: Mapping[str, Sequence[float]], xlabel: str,
                 ylabel: str = "seconds") -> str:
    """One bar per x, split into named parts (seconds per step of each iteration)."""
    fig = _single(_PANEL_W * 1.6, _PANEL_H * 1.2, top=0.45)
    ax = fig.subplots()
    bottom = [0.0] * len(x)
    for i, (name, values) in enumerate(parts.items()):
        ax.bar(x, values, bottom=bottom, color=COLORS[i % len(COLORS)], label=name, width=0.8)
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    _style(ax, "", xlabel)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.legend(fontsize=8, frameon=False, ncols=min(6, len(parts)), loc="upper left",
              bbox_to_anchor=(0, 1.18))
    return data_uri(fig)


def overlay(quantities: Sequence[tuple[str, str, Sequence[Series | None]]],
            labels: Sequence[str], ncols: int = 3) -> str:
    """Small multiples of (title, x label, one series per run): a line per run, in the
    run's color, the legend (the runs) once above the plots. Lines that coincide are dashed
    differently with their markers on alternate points, and the plot says they coincide."""
    fig, axes = _axes(len(quantities), ncols)
    for ax, (title, xlabel, per_run) in zip(axes, quantities, strict=True):
        values: list[float] = []
        styles = line_styles(per_run)
        for i, s in enumerate(per_run):
            if s is None or not s.x:
                continue
            x, mean = _with_gaps(s.x, s.mean)
            style = styles[i] if len(s.x) <= 30 else {**styles[i], "marker": None}
            ax.plot(x, mean, color=COLORS[i % len(COLORS)], linewidth=1.5, markersize=3,
                    label=labels[i], **style)
            values += s.mean
        _style(ax, title, xlabel)
        _say_coinciding(ax, coinciding(per_run), labels)
        limits = y_limits(values)
        if limits is not None:
            ax.set_ylim(*limits)
    handles = [Line2D([], [], color=COLORS[i % len(COLORS)], linewidth=2)
               for i in range(len(labels))]
    fig.legend(handles, labels, loc="lower left", bbox_to_anchor=(0.0, 1.0),
               ncols=min(4, len(labels)), fontsize=8, frameon=False)
    return data_uri(fig)


DASHES = ("-", (0, (4, 3)), (0, (1, 2)), (0, (6, 2, 1, 2)))
MARKERS = ("o", "s", "^", "D")


def coinciding(per_run: Sequence[Series | None]) -> list[list[int]]:
    """Groups of two or more runs whose lines would hide each other: the same x and means
    equal to 4 significant digits (a line width on any plot this size)."""
    groups: dict[tuple, list[int]] = {}
    for i, s in enumerate(per_run):
        if s is not None and s.x:
            shape = (tuple(s.x), tuple(float(f"{v:.4g}") for v in s.mean))
            groups.setdefault(shape, []).append(i)
    return [g for g in groups.values() if len(g) > 1]


def line_styles(per_run: Sequence[Series | None]) -> list[dict]:
    """Each run's line style: solid with round markers, but in a group that coincides the
    k-th run gets the k-th dash pattern and marker, its markers on every n-th point from
    the k-th, so every run of the group stays visible."""
    styles: list[dict] = [{"linestyle": "-", "marker": "o"} for _ in per_run]
    for group in coinciding(per_run):
        for k, i in enumerate(group):
            styles[i] = {"linestyle": DASHES[k % len(DASHES)], "marker": MARKERS[k % len(MARKERS)],
                         "markevery": (k, len(group))}
    return styles


def _say_coinciding(ax, groups: list[list[int]], labels: Sequence[str]) -> None:
    for n, group in enumerate(groups):
        ax.text(0.02, 0.97 - 0.09 * n, "coincide: " + " = ".join(labels[i] for i in group),
                transform=ax.transAxes, fontsize=7, va="top", color="#555555")
