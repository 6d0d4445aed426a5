"""Dataset preparation for the offline flows. Reads: dataset specs. Commits:
`offline_examples` (token ids of every train and eval example), and `metrics`
(`data/*` counts, truncation included).

Preparation does not depend on the run's seed (the mix and the eval hold-out use
`data.seed`; the training order is drawn per epoch at train time), so the task is cached
across runs: the same data config and tokenizer reuse one prepared table, and the cached
reference log-probs keyed on it.
"""

from __future__ import annotations

import random

import datasets
import pyarrow as pa

from alignflow.artifacts.scope import current_scope
from alignflow.errors import ConfigError
from alignflow.tasks.data.loading import mix_datasets
from alignflow.tasks.data.named import with_own_columns
from alignflow.tasks.modeling.loading import load_tokenizer
from alignflow.tasks.offline.config import PrepareSpec
from alignflow.tasks.offline.kinds import objective
from alignflow.tasks.offline.records import OfflineData
from alignflow.tasks.offline.rows import pretrain_rows
from alignflow.tasks.offline.tables import OFFLINE_EXAMPLES
from alignflow.tasks.steps.metrics import write_metrics
from alignflow.tasks.zoo.registry import resolve_model


def split_data(spec: PrepareSpec) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """(train, eval): the eval set is `eval.dataset`, else `eval.ratio` held out by
    `data.seed`."""
    cfg, evaluation = spec.data, spec.eval
    ds = mix_datasets(cfg.dataset, cfg.dataset_probs, split=cfg.dataset_split,
                      max_samples=cfg.max_samples, seed=cfg.seed)
    if evaluation.dataset:
        return ds, mix_datasets(evaluation.dataset, None, split=evaluation.split, seed=cfg.seed)
    if evaluation.ratio <= 0:
        return ds, None
    order = list(range(len(ds)))
    random.Random(cfg.seed).shuffle(order)
    n_eval = max(1, round(evaluation.ratio * len(ds)))
    return ds.select(sorted(order[n_eval:])), ds.select(sorted(order[:n_eval]))


def prepare(spec: PrepareSpec, kind: str, tokenizer: str,
            fingerprint: str = "") -> OfflineData:
    """Tokenizes train and eval examples once and commits them with their counts.
    `fingerprint` (of the local data files) only keys the engine's cache."""
    scope = current_scope()
    tok = load_tokenizer(resolve_model(tokenizer), padding_side="right")
    build = pretrain_rows if spec.pretrain_mode else objective(kind).rows
    cfg = with_own_columns(spec.data, spec.data.dataset)
    train, evaluation = split_data(spec)
    splits = {"train": build(train, tok, cfg)}
    if evaluation is not None:
        splits["eval"] = build(evaluation, tok, cfg)
    if len(splits["train"]) == 0:
        raise ConfigError(f"data.dataset={cfg.dataset!r}: no training examples")
    rows = [{**row, "split": name, "position": i}
            for name, part in splits.items() for i, row in enumerate(part)]
    ref = scope.write(OFFLINE_EXAMPLES, examples_table(rows))
    truncated = sum(r["truncated"] for r in rows)
    metrics = {"data/train": float(len(splits["train"])),
               "data/eval": float(len(splits.get("eval", []))),
               "data/truncated": float(truncated),
               "data/truncated_frac": truncated / len(rows)}
    write_metrics(scope, [(0, metrics)])
    return OfflineData((ref,), kind, len(splits["train"]), len(splits.get("eval", [])), metrics)


def examples_table(rows: list[dict]) -> pa.Table:
    """`offline_examples` rows (each with split and position) as an Arrow table."""
    schema = pa.schema([f for f in OFFLINE_EXAMPLES.arrow_schema
                        if f.name not in ("run_id", "task_key")])
    return pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)
