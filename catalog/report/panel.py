"""One block of the report page (the unit that panel functions return)."""

from __future__ import annotations

from dataclasses import dataclass

from markupsafe import Markup


@dataclass(frozen=True)
class Panel:
    """A titled block; `note` says how to read it, `sql` is the query behind it (folded)."""

    title: str
    body: Markup
    note: str = ""
    sql: str = ""
    wide: bool = False
