"""What a dataset spec names, and its files read as arrow tables, without `datasets`.

`loading.py` wraps these tables as `datasets.Dataset`s where a step reads them; a config
check on the driver (`flows/cli/preflight.py`) reads them as they are (`read_for_check`),
so the driver imports no `datasets` (or, through it, pandas) to check a named set or a
local file. Only a hub name or a `save_to_disk` folder needs `datasets` to be read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Literal

import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from alignflow.artifacts import sources
from alignflow.artifacts.redact import redact
from alignflow.errors import ConfigError
from alignflow.tasks.data.named import PREFIX, named_rows

SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


def locate(spec: str) -> tuple[Literal["named", "path", "hub"], Any]:
    """("named", NAME), ("path", local Path: a URL is fetched) or ("hub", spec)."""
    spec = spec.strip()
    if spec.startswith(PREFIX):
        return "named", spec[len(PREFIX):]
    if sources.is_url(spec):
        return "path", Path(sources.local_path(spec))
    if Path(spec).expanduser().exists():
        return "path", Path(spec).expanduser()
    if spec.startswith(("/", ".", "~")) or Path(spec).suffix in SUFFIXES:
        raise ConfigError(f"dataset path {spec!r} does not exist")
    return "hub", spec


def is_saved_dataset(path: Path) -> bool:
    """A `Dataset.save_to_disk` folder (only `datasets` reads it)."""
    return path.is_dir() and (path / "state.json").is_file() and (
        path / "dataset_info.json").is_file()


def _read_json(path: Path) -> pa.Table:
    with path.open() as f:
        first = f.read(1024).lstrip()[:1]
    if first == "[":  # one JSON array of records
        return pa.Table.from_pylist(json.loads(path.read_text()))
    return pa_json.read_json(path)


def read_file(path: Path) -> pa.Table:
    """One `.json/.jsonl/.parquet/.csv` file."""
    if path.suffix not in SUFFIXES:
        raise ConfigError(f"dataset file {str(path)!r}: expected one of {list(SUFFIXES)}")
    try:
        if path.suffix in (".json", ".jsonl"):
            return _read_json(path)
        if path.suffix == ".parquet":
            return pq.read_table(path)
        return pa_csv.read_csv(path)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise ConfigError(f"cannot read dataset file {str(path)!r}: {exc}") from None


def read_folder(path: Path) -> pa.Table:
    """Every data file under a folder, one table (their columns must agree)."""
    files = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES)
    if not files:
        raise ConfigError(f"dataset folder {str(path)!r} holds no {list(SUFFIXES)} files")
    try:
        return pa.concat_tables([read_file(f) for f in files], promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ConfigError(f"dataset folder {str(path)!r}: files disagree on columns: "
                          f"{exc}") from None


@dataclass(frozen=True)
class TableRows:
    """A data set's columns as Python lists, answering what the config checks ask of a
    `datasets.Dataset`: its column names, a column's values, its rows, its name."""

    columns: dict[str, list]
    name: str

    @property
    def column_names(self) -> list[str]:
        return list(self.columns)

    @property
    def info(self) -> SimpleNamespace:
        return SimpleNamespace(dataset_name=self.name)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), []))

    def __getitem__(self, key: str) -> list:
        return self.columns[key]

    def select(self, rows: range) -> TableRows:
        return TableRows({k: v[rows.start:rows.stop] for k, v in self.columns.items()},
                         self.name)


def read_for_check(spec: str, split: str | None = None) -> TableRows | None:
    """The data set `spec` names, read without `datasets` (a named set's rows as they are,
    so not even pyarrow's pandas bridge is loaded); None for a hub name or a saved Dataset
    folder (the caller loads those with `loading.load_dataset_spec`)."""
    kind, where = locate(spec)
    if kind == "named":
        rows = named_rows(where, split)
        columns = {k: [r.get(k) for r in rows] for k in (rows[0] if rows else {})}
    elif kind == "path" and not is_saved_dataset(where):
        columns = (read_folder(where) if where.is_dir() else read_file(where)).to_pydict()
    else:
        return None
    return TableRows(columns, redact(spec.strip()))
