"""Notes on what a run's data holds but its config does not read.

DPO and RM on the usual `prompt, chosen, rejected` file with `data.prompt_key` unset train
on the bare answers: OpenRLHF 0.11 does the same (`--data.prompt_key` defaults to None, and
its `preprocess_data` then sets `prompt = ""`), so alignflow follows it, and says so once
the data has a `prompt` column. Only the first row's columns are read (a file's first line,
a Parquet schema, a CSV header), so the note costs nothing on a large file.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

PAIR_KINDS = ("dpo", "rm")


def _first_file(spec: str, split: str | None) -> Path | None:
    from alignflow.errors import ConfigError
    from alignflow.tasks.data.files import is_saved_dataset, locate
    from alignflow.tasks.data.splits import split_files

    try:
        found = locate(spec)
        if found.kind != "path" or is_saved_dataset(found.where):
            return None
        if found.where.is_dir():
            return split_files(found.where, split, found.suffixes)[0]
        return found.where
    except ConfigError:  # the data check reports it
        return None


def columns(spec: str, split: str | None) -> list[str]:
    """The first row's column names of a local data file or folder split ([] if unknown)."""
    path = _first_file(spec, split)
    try:
        if path is None:
            return []
        if path.suffix == ".parquet":
            return list(pq.read_schema(path).names)
        with path.open() as f:
            first = f.readline()
        if path.suffix == ".csv":
            return [c.strip().strip('"') for c in first.split(",")]
        row = json.loads(first) if path.suffix == ".jsonl" or first.lstrip()[:1] == "{" else {}
        return list(row) if isinstance(row, dict) else []
    except (OSError, ValueError):
        return []


def prompt_column_notes(cfg: Any) -> list[str]:
    """A note when a DPO/RM run leaves a `prompt` column of its data unread."""
    data = getattr(cfg, "data", None)  # a loop's (iterative DPO) is prompt data: no pairs
    if data is None or getattr(cfg, "KIND", None) not in PAIR_KINDS or not hasattr(data, "dataset") \
            or getattr(data, "prompt_key", None) is not None:
        return []
    for part in (p.strip() for p in data.dataset.split(",") if p.strip()):
        if "prompt" in columns(part, data.dataset_split):
            return [f"data.prompt_key is unset: the 'prompt' column of {part} is not read, "
                    f"so {cfg.KIND} compares chosen and rejected without their prompt, as "
                    "OpenRLHF 0.11 does (its --data.prompt_key defaults to None); add "
                    "--prompt_key prompt to condition on it"]
    return []
