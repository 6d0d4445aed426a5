"""Load a dataset from a spec string, and mix several with probabilities (OpenRLHF style).

A spec is `alignflow:NAME` (see `named.py`), a local `.json/.jsonl/.parquet/.csv` file, a
folder of such files (or a `save_to_disk` folder), an `s3://` URL of either (fetched once
per node into its content cache, held to the run's pin: `artifacts/sources/`), or an HF
hub name (offline: it must be in the local HF cache). `mix_datasets("a,b", "0.7,0.3", seed=...)` interleaves them.
"""

from __future__ import annotations

import json
from pathlib import Path

import datasets
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.json as pa_json
import pyarrow.parquet as pq

from alignflow.artifacts import sources
from alignflow.artifacts.redact import redact
from alignflow.errors import ConfigError
from alignflow.tasks.data.named import PREFIX, load_named

SUFFIXES = (".jsonl", ".json", ".parquet", ".csv")


def _read_json(path: Path) -> pa.Table:
    with path.open() as f:
        first = f.read(1024).lstrip()[:1]
    if first == "[":  # one JSON array of records
        return pa.Table.from_pylist(json.loads(path.read_text()))
    return pa_json.read_json(path)


def _read_file(path: Path) -> pa.Table:
    try:
        if path.suffix in (".json", ".jsonl"):
            return _read_json(path)
        if path.suffix == ".parquet":
            return pq.read_table(path)
        return pa_csv.read_csv(path)
    except (pa.ArrowInvalid, ValueError) as exc:
        raise ConfigError(f"cannot read dataset file {str(path)!r}: {exc}") from None


def _load_path(path: Path) -> datasets.Dataset:
    if path.is_dir():
        if (path / "state.json").is_file() and (path / "dataset_info.json").is_file():
            return datasets.load_from_disk(str(path))
        files = sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES)
        if not files:
            raise ConfigError(f"dataset folder {str(path)!r} holds no {list(SUFFIXES)} files")
        try:
            table = pa.concat_tables([_read_file(f) for f in files], promote_options="default")
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise ConfigError(f"dataset folder {str(path)!r}: files disagree on columns: "
                              f"{exc}") from None
        return datasets.Dataset(table)
    if path.suffix not in SUFFIXES:
        raise ConfigError(f"dataset file {str(path)!r}: expected one of {list(SUFFIXES)}")
    return datasets.Dataset(_read_file(path))


def _load_hub(name: str, split: str | None) -> datasets.Dataset:
    try:
        ds = datasets.load_dataset(name, split=split or "train")
    except Exception as exc:  # offline and not cached, unknown name, bad split: one message
        raise ConfigError(
            f"dataset {name!r} is not alignflow:NAME, not a local path and could not be loaded "
            f"from the local Hugging Face cache (alignflow works offline): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        ) from None
    return ds


def load_dataset_spec(spec: str, split: str | None = None) -> datasets.Dataset:
    """One dataset from `alignflow:NAME`, a local file/folder, or a cached HF hub name."""
    spec = spec.strip()
    if spec.startswith(PREFIX):
        ds = load_named(spec[len(PREFIX):], split)
    elif sources.is_url(spec):
        ds = _load_path(Path(sources.local_path(spec)))
    elif Path(spec).expanduser().exists():
        ds = _load_path(Path(spec).expanduser())
    elif spec.startswith(("/", ".", "~")) or Path(spec).suffix in SUFFIXES:
        raise ConfigError(f"dataset path {spec!r} does not exist")
    else:
        ds = _load_hub(spec, split)
    ds.info.dataset_name = redact(spec)
    return ds


def _split_list(value: str | list | tuple | None) -> list[str]:
    if value is None:
        return []
    items = value.split(",") if isinstance(value, str) else list(value)
    return [str(v).strip() for v in items if str(v).strip()]


def _probabilities(probs: str | list | None, n: int) -> list[float] | None:
    values = _split_list(probs)
    if not values:
        return None
    try:
        floats = [float(v) for v in values]
    except ValueError:
        raise ConfigError(f"dataset_probs {probs!r}: expected comma-separated numbers") from None
    if len(floats) != n or any(p < 0 for p in floats) or sum(floats) <= 0:
        raise ConfigError(f"dataset_probs {probs!r}: expected {n} non-negative numbers, "
                          f"one per dataset, with a positive sum")
    return [p / sum(floats) for p in floats]


def mix_datasets(
    specs: str | list[str],
    probs: str | list[float] | None = None,
    *,
    split: str | None = None,
    max_samples: int | None = None,
    seed: int = 42,
    stopping_strategy: str = "first_exhausted",
) -> datasets.Dataset:
    """Interleave datasets with `probs` (seeded); keep the first `max_samples` rows."""
    names = _split_list(specs)
    if not names:
        raise ConfigError(f"dataset {specs!r}: expected one or more comma-separated specs")
    parts = [load_dataset_spec(name, split) for name in names]
    weights = _probabilities(probs, len(parts))
    if len(parts) == 1:
        mixed = parts[0]
    else:
        columns = [sorted(p.column_names) for p in parts]
        if any(c != columns[0] for c in columns):
            raise ConfigError(f"datasets {names} have different columns {columns}; "
                              f"mix only datasets with the same columns")
        mixed = datasets.interleave_datasets(parts, probabilities=weights, seed=seed,
                                             stopping_strategy=stopping_strategy)
        mixed.info.dataset_name = ",".join(names)
    if max_samples is not None and max_samples < len(mixed):
        mixed = mixed.select(range(max_samples))
    return mixed
