"""alignflow.catalog: read-only SQL (DuckDB) over the committed data of a store."""

from __future__ import annotations

from typing import Any

__all__ = ["Catalog"]


def __getattr__(name: str) -> Any:
    if name == "Catalog":
        from alignflow.catalog.catalog import Catalog

        return Catalog
    raise AttributeError(f"module 'alignflow.catalog' has no attribute {name!r}")
