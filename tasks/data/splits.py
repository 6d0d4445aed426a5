"""A local data folder's splits, named from its paths the way HF datasets names them.

OpenRLHF reads a folder with `load_dataset(DIR)` (or `load_dataset("json", data_dir=DIR)`
for `json@DIR`) and trains on `data[train_split]`; `datasets` (data_files.py) splits the
folder's files by their paths, first rule that finds a file wins:

1. `data/{split}-00000-of-00001.parquet` shards: one split per name (`train_prefs`, ...);
2. a folder named for a split: `train/`, `training/`; `validation/`, `valid/`, `dev/`,
   `val/`; `test/`, `testing/`, `eval/`, `evaluation/` (also `my_train/`, `train-2/`);
3. a file named so: `train.jsonl`, `train_prefs.jsonl` -> train, `test_prefs.jsonl` -> test;
4. otherwise every file is `train`.

Files no rule places are not read (as there). Hidden files, `__*` folders and `datasets`'
own metadata files are skipped. alignflow reads the data files only (`files.SUFFIXES`).
"""

from __future__ import annotations

import re
from pathlib import Path

from alignflow.errors import ConfigError

KEYWORDS = {"train": ("train", "training"),
            "validation": ("validation", "valid", "dev", "val"),
            "test": ("test", "testing", "eval", "evaluation")}
SEP = r"[-._ 0-9]"  # HF's NON_WORDS_CHARS around a keyword
SHARD = re.compile(r"^(?P<split>\w+(?:\.\w+)*)-\d{5}-of-\d{5}.*\.[^.]+$")
IGNORED = {"config.json", "dataset_info.json", "dataset_infos.json", "dataset_dict.json"}


def _keyword(words: tuple[str, ...], *, folder: bool) -> re.Pattern:
    """A folder named `kw`, `kw_*`, `*_kw`, `*_kw_*`; a file named `kw_*` or `*_kw_*`."""
    alt = "|".join(words)
    tail = f"(?:{SEP}.*)?" if folder else f"{SEP}.*"
    return re.compile(f"^(?:.*{SEP})?(?:{alt}){tail}$")


FOLDER_RULES = {s: _keyword(w, folder=True) for s, w in KEYWORDS.items()}
FILE_RULES = {s: _keyword(w, folder=False) for s, w in KEYWORDS.items()}


def _data_files(path: Path, suffixes: tuple[str, ...]) -> list[Path]:
    """The folder's data files, relative to it, less hidden and metadata files."""
    found = []
    for f in sorted(path.rglob("*")):
        rel = f.relative_to(path)
        if f.suffix not in suffixes or not f.is_file() or rel.name in IGNORED:
            continue
        if not any(p.startswith((".", "__")) for p in rel.parts):
            found.append(rel)
    return found


def _sharded(files: list[Path]) -> dict[str, list[Path]]:
    splits: dict[str, list[Path]] = {}
    for rel in files:
        match = SHARD.match(rel.name) if rel.parent == Path("data") else None
        if match:
            splits.setdefault(match["split"], []).append(rel)
    known = [s for s in KEYWORDS if s in splits]
    return {s: splits[s] for s in known + sorted(set(splits) - set(known))}


def _by_rules(files: list[Path], rules: dict[str, re.Pattern], *, folder: bool
              ) -> dict[str, list[Path]]:
    splits = {}
    for split, rule in rules.items():
        hits = [rel for rel in files
                if any(rule.match(p) for p in (rel.parts[:-1] if folder else (rel.name,)))]
        if hits:
            splits[split] = hits
    return splits


def folder_splits(path: Path, suffixes: tuple[str, ...]) -> dict[str, list[Path]]:
    """split -> the folder's files in it (relative paths), in HF's order (train first)."""
    files = _data_files(path, suffixes)
    if not files:
        raise ConfigError(f"dataset folder {str(path)!r} holds no {list(suffixes)} files")
    return (_sharded(files) or _by_rules(files, FOLDER_RULES, folder=True)
            or _by_rules(files, FILE_RULES, folder=False) or {"train": files})


def _describe(splits: dict[str, list[Path]]) -> str:
    def names(files: list[Path]) -> str:
        shown = ", ".join(str(f) for f in files[:2])
        return shown + (f", +{len(files) - 2} more" if len(files) > 2 else "")
    return "; ".join(f"{split} ({names(files)})" for split, files in splits.items())


def split_files(path: Path, split: str | None, suffixes: tuple[str, ...]) -> list[Path]:
    """The files of `split` (None: the first split), refused in one line when the folder
    has no such split (naming those it has and the files in each)."""
    splits = folder_splits(path, suffixes)
    if split is None:
        split = next(iter(splits))
    if split not in splits:
        raise ConfigError(f"dataset folder {str(path)!r} has no split {split!r}: its files "
                          f"split (by their names, as HF datasets' load_dataset(DIR) splits "
                          f"them) into {_describe(splits)}; name one of {list(splits)}")
    return [path / rel for rel in splits[split]]
