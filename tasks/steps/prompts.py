"""Prompt data for RL flows. Reads: a dataset spec. Commits: the `prompts` table, once.

Committing the prepared prompts (chat template applied, token ids, labels, in a seeded
order) makes every later iteration read exactly the same batch on resume, even if the
dataset files or the tokenizer change underneath the run.
"""

from __future__ import annotations

import random

import pyarrow as pa

from alignflow.artifacts.parquet_io import read_table
from alignflow.artifacts.scope import current_scope
from alignflow.errors import ConfigError
from alignflow.tasks.data.loading import mix_datasets
from alignflow.tasks.data.named import with_own_columns
from alignflow.tasks.data.prompts import prepare_prompts
from alignflow.tasks.data.source import DataConfig
from alignflow.tasks.modeling.loading import load_tokenizer
from alignflow.tasks.steps.records import StepOutput
from alignflow.tasks.steps.tables import PROMPTS
from alignflow.tasks.zoo.registry import resolve_model


def load_prompts(cfg: DataConfig, tokenizer: str, max_new_tokens: int | None = None
                 ) -> StepOutput:
    """Prepares, tokenizes and commits the run's prompts in their (seeded) order; prompts
    are fitted to `cfg.prompt_limit(max_new_tokens)`."""
    scope, cfg = current_scope(), with_own_columns(cfg, cfg.prompt_dataset)
    dataset = mix_datasets(cfg.prompt_dataset, cfg.prompt_probs, split=cfg.prompt_split,
                           max_samples=cfg.max_samples, seed=scope.seed)
    tok = load_tokenizer(resolve_model(tokenizer))
    limit, overlong = cfg.prompt_limit(max_new_tokens)
    prepared = prepare_prompts(dataset, tok, input_key=cfg.input_key, label_key=cfg.label_key,
                               apply_chat_template=cfg.apply_chat_template,
                               input_template=cfg.input_template,
                               prompt_max_len=limit, overlong=overlong)
    if not prepared.rows:
        raise ConfigError(f"data.prompt_dataset={cfg.prompt_dataset!r}: no prompts left after "
                          f"prompt_max_len={limit} ({prepared.dropped} dropped)")
    rows = list(prepared.rows)
    if cfg.shuffle:
        random.Random(scope.seed).shuffle(rows)
    ids = [tok(r["prompt"], add_special_tokens=False)["input_ids"] for r in rows]
    table = pa.table({
        "run_id": [scope.run_id] * len(rows),
        "task_key": [scope.task_key] * len(rows),
        "prompt_id": [str(r["prompt_id"]) for r in rows],
        "position": list(range(len(rows))),
        "prompt": [r["prompt"] for r in rows],
        "prompt_ids": ids,
        "label": [None if r["label"] in (None, "") else str(r["label"]) for r in rows],
        "source": [cfg.prompt_dataset] * len(rows),
        "datasource": [r.get("datasource") for r in rows],
    })
    ref = scope.write(PROMPTS, table)
    return StepOutput((ref,), len(rows), {"prompts": float(len(rows)),
                                          "dropped": float(prepared.dropped),
                                          "truncated": float(prepared.truncated)})


def prompt_batch(store, prompts: StepOutput, iteration: int, batch_size: int,
                 start: int | None = None) -> pa.Table:
    """Rows of iteration `iteration`: the next `batch_size` prompts, wrapping around (from
    prompt `start` when given: a refilled iteration draws past its own share)."""
    table = read_table(store, prompts.refs)
    n = table.num_rows
    start = iteration * batch_size if start is None else start
    index = [(start + i) % n for i in range(batch_size)]
    return table.take(pa.array(index))
