"""Load a dataset from a spec string, and mix several with probabilities (OpenRLHF style).

A spec is `alignflow:NAME` (see `named.py`), a local `.json/.jsonl/.parquet/.csv` file, a
folder of such files (one split of it, named from its file names as HF datasets does:
`splits.py`), OpenRLHF's `json@DIR` (that loader's files in DIR), a `save_to_disk`
folder, an `s3://` URL of either (fetched once per node into its content cache, held to
the run's pin: `artifacts/sources/`), or an HF hub name (offline: it must be in the local
HF cache). `mix_datasets("a,b", "0.7,0.3", seed=...)` interleaves them.
"""

from __future__ import annotations

import datasets

from alignflow.artifacts.redact import redact
from alignflow.errors import ConfigError
from alignflow.tasks.data.files import Located, is_saved_dataset, locate, read_path
from alignflow.tasks.data.named import load_named


def _load_path(found: Located, split: str | None) -> datasets.Dataset:
    if is_saved_dataset(found.where):
        return datasets.load_from_disk(str(found.where))
    return datasets.Dataset(read_path(found, split))


def _load_hub(name: str, split: str | None, data_dir: str | None = None) -> datasets.Dataset:
    try:
        ds = datasets.load_dataset(name, data_dir=data_dir, split=split or "train")
    except Exception as exc:  # offline and not cached, unknown name, bad split: one message
        raise ConfigError(
            f"dataset {name!r} is not alignflow:NAME, not a local path and could not be loaded "
            f"from the local Hugging Face cache (alignflow works offline): "
            f"{type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        ) from None
    return ds


def load_dataset_spec(spec: str, split: str | None = None) -> datasets.Dataset:
    """One dataset from `alignflow:NAME`, a local file/folder (`json@DIR` too: one split
    of it, `splits.py`), or a cached HF hub name."""
    spec = spec.strip()
    found = locate(spec)
    if found.kind == "named":
        ds = load_named(found.where, split)
    elif found.kind == "path":
        ds = _load_path(found, split)
    else:
        ds = _load_hub(found.where, split, found.data_dir)
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
