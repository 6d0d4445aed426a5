"""How DuckDB names a store file, and how a DuckDB message names one back."""

from __future__ import annotations

import re

from alignflow.artifacts.store import Store


def duckdb_path(store: Store, rel: str) -> str:
    """How DuckDB names a store file: a plain path locally, `proto://...` through fsspec."""
    full = store.path(rel)
    return full if store.is_local else store.fs.unstrip_protocol(full)


def file_in_message(message: str, files_by_name: dict[str, str]) -> str | None:
    """The store path of the committed file a DuckDB error message names, if any."""
    for name in re.findall(r"[^/\\\"' ]+\.parquet", message):
        if name in files_by_name:
            return files_by_name[name]
    return None


def literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"
