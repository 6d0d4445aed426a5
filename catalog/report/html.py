"""Small HTML builders for panels; every value from the store is escaped here.

Store text (prompts, responses, errors, config values) is data someone else wrote, so it
only ever reaches the page through `markupsafe.escape`; the page also forbids scripts
(Content-Security-Policy in `page.html.jinja`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from markupsafe import Markup, escape

MAX_TEXT = 600


def img(uri: str, alt: str) -> Markup:
    return Markup('<img src="{}" alt="{}">').format(uri, alt)


def text(value: Any, limit: int = MAX_TEXT) -> Markup:
    """A value as escaped text, long ones cut (the full text stays in the title)."""
    s = "" if value is None else str(value)
    if len(s) <= limit:
        return Markup('<span class="t">{}</span>').format(s)
    return Markup('<span class="t" title="{}">{}…</span>').format(s, s[:limit])


def cell(value: Any) -> Markup:
    if isinstance(value, float):
        return escape(f"{value:.4g}")
    return text(value, 200)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]], cls: str = "") -> Markup:
    """A plain table; cells that are already Markup are kept, the rest escaped."""
    head = Markup("").join(Markup("<th>{}</th>").format(c) for c in columns)
    body = Markup("").join(
        Markup("<tr>{}</tr>").format(Markup("").join(
            Markup("<td>{}</td>").format(v if isinstance(v, Markup) else cell(v)) for v in row))
        for row in rows)
    return Markup('<table class="{}"><thead><tr>{}</tr></thead><tbody>{}</tbody></table>').format(
        cls, head, body)


def facts(pairs: Iterable[tuple[str, Any]]) -> Markup:
    """Key/value pairs, laid out in as many columns as fit (values may be Markup)."""
    items = Markup("").join(
        Markup("<div><dt>{}</dt><dd>{}</dd></div>").format(
            k, v if isinstance(v, Markup) else cell(v))
        for k, v in pairs)
    return Markup('<dl class="facts">{}</dl>').format(items)


def note(message: str) -> Markup:
    return Markup('<p class="note">{}</p>').format(message)


def alert(message: str) -> Markup:
    return Markup('<p class="alert">{}</p>').format(message)


def join(*parts: Markup) -> Markup:
    return Markup("").join(p for p in parts if p)
