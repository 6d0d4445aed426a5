"""`alignflow report`: one self-contained HTML page per run, built from catalog SQL."""

from __future__ import annotations

from alignflow.catalog.report.page import render_report

__all__ = ["render_report"]
