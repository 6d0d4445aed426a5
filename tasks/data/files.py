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
from alignflow.tasks.data.splits import split_files

SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")
# HF's file loaders a `NAME@DIR` spec may name, and the files each reads
LOADERS = {"json": (".jsonl", ".json"), "csv": (".csv",), "parquet": (".parquet",)}


@dataclass(frozen=True)
class Located:
    """What a spec names: kind "named" (where: the name), "path" (a local Path; a folder
    reads only `suffixes`) or "hub" (where: the hub name; data_dir: its `NAME@DIR` part)."""

    kind: Literal["named", "path", "hub"]
    where: Any
    suffixes: tuple[str, ...] = SUFFIXES
    data_dir: str | None = None


def _local(spec: str) -> Path:
    """A local path, or a URL fetched into the content cache."""
    return Path(sources.local_path(spec)) if sources.is_url(spec) else Path(spec).expanduser()


def locate(spec: str) -> Located:
    """Where `spec` is: `alignflow:NAME`, a local path or URL, OpenRLHF's `NAME@DIR`
    (`json@DIR`: that loader's files in DIR; `FOLDER@SUB`: FOLDER/SUB; `org/set@SUB`: the
    hub set's data_dir, as `blending_datasets` passes it to `load_dataset`), or a hub name."""
    spec = spec.strip()
    if spec.startswith(PREFIX):
        return Located("named", spec[len(PREFIX):])
    if sources.is_url(spec) or Path(spec).expanduser().exists():
        return Located("path", _local(spec))
    if "@" in spec:
        return _at_spec(spec)
    if spec.startswith(("/", ".", "~")) or Path(spec).suffix in SUFFIXES:
        raise ConfigError(f"dataset path {spec!r} does not exist")
    return Located("hub", spec)


def _at_spec(spec: str) -> Located:
    """OpenRLHF's `NAME@DIR` (blending_datasets: load_dataset(NAME, data_dir=DIR))."""
    name, _, data_dir = (part.strip() for part in spec.partition("@"))
    if not name or not data_dir:
        raise ConfigError(f"dataset {spec!r}: expected NAME@DIR, e.g. json@/data/dir "
                          "(a loader or folder or hub name, then the folder to read)")
    if name in LOADERS:
        folder = _local(data_dir)
        if not folder.is_dir():
            raise ConfigError(f"dataset {spec!r}: folder {data_dir!r} does not exist "
                              f"(expected {name}@DIR with DIR a folder of {name} files)")
        return Located("path", folder, LOADERS[name])
    if Path(name).expanduser().is_dir():
        folder = Path(name).expanduser() / data_dir
        if not folder.is_dir():
            raise ConfigError(f"dataset {spec!r}: {str(folder)!r} is not a folder "
                              "(FOLDER@SUB reads the folder SUB inside FOLDER)")
        return Located("path", folder)
    if name.startswith(("/", ".", "~")) or "/" not in name:
        raise ConfigError(f"dataset {spec!r}: {name!r} is not a loader alignflow reads "
                          f"({', '.join(LOADERS)}), a folder or an org/name hub set; write "
                          f"json@DIR, csv@DIR or parquet@DIR, or the folder's path itself")
    return Located("hub", name, data_dir=data_dir)


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


def read_folder(path: Path, split: str | None = None,
                suffixes: tuple[str, ...] = SUFFIXES) -> pa.Table:
    """The files of one split of a folder (`splits.py`: split by their names, as HF
    datasets does; None: its first split), one table (their columns must agree)."""
    files = split_files(path, split, suffixes)
    try:
        return pa.concat_tables([read_file(f) for f in files], promote_options="default")
    except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
        raise ConfigError(f"dataset folder {str(path)!r}: files disagree on columns: "
                          f"{exc}") from None


def read_path(found: Located, split: str | None) -> pa.Table:
    """A located file (the whole file: HF names its one split `train`, and alignflow
    reads it under any split name) or one split of a located folder."""
    if found.where.is_dir():
        return read_folder(found.where, split, found.suffixes)
    return read_file(found.where)


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
    found = locate(spec)
    if found.kind == "named":
        rows = named_rows(found.where, split)
        columns = {k: [r.get(k) for r in rows] for k in (rows[0] if rows else {})}
    elif found.kind == "path" and not is_saved_dataset(found.where):
        columns = read_path(found, split).to_pydict()
    else:
        return None
    return TableRows(columns, redact(spec.strip()))
