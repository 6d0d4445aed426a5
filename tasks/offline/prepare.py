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
import time

import datasets
import pyarrow as pa

from alignflow.artifacts.errors import ConfigError
from alignflow.artifacts.schemas import METRICS
from alignflow.artifacts.scope import current_scope
from alignflow.tasks.data.loading import mix_datasets
from alignflow.tasks.data.pairs import prepare_preferences, prepare_sft
from alignflow.tasks.modeling.loading import load_tokenizer
from alignflow.tasks.models.registry import resolve_model
from alignflow.tasks.offline.config import PAIR_KINDS, Kind, OfflineDataConfig
from alignflow.tasks.offline.records import OfflineData
from alignflow.tasks.offline.tables import OFFLINE_EXAMPLES


def split_data(cfg: OfflineDataConfig) -> tuple[datasets.Dataset, datasets.Dataset | None]:
    """(train, eval): the eval set is `eval_dataset`, else `eval_ratio` held out by `seed`."""
    ds = mix_datasets(cfg.dataset, cfg.dataset_probs, split=cfg.split,
                      max_samples=cfg.max_samples, seed=cfg.seed)
    if cfg.eval_dataset:
        return ds, mix_datasets(cfg.eval_dataset, None, split=cfg.eval_split, seed=cfg.seed)
    if cfg.eval_ratio <= 0:
        return ds, None
    order = list(range(len(ds)))
    random.Random(cfg.seed).shuffle(order)
    n_eval = max(1, round(cfg.eval_ratio * len(ds)))
    return ds.select(sorted(order[n_eval:])), ds.select(sorted(order[:n_eval]))


def _ids(tok, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"])


def _fit_pair(p: list[int], c: list[int], r: list[int], max_len: int):
    """Truncate responses on the right (and an overlong prompt on the left) to max_len."""
    cut = len(p) + max(len(c), len(r)) > max_len
    p = p[-(max_len // 2):] if len(p) > max_len // 2 and cut else p
    room = max_len - len(p)
    return p, c[:room], r[:room], cut


def pair_rows(ds, tok, cfg: OfflineDataConfig) -> list[dict]:
    prepared = prepare_preferences(ds, tok, prompt_key=cfg.prompt_key,
                                   chosen_key=cfg.chosen_key, rejected_key=cfg.rejected_key,
                                   apply_chat_template=cfg.apply_chat_template,
                                   input_template=cfg.input_template)
    eos = [] if cfg.apply_chat_template else [tok.eos_token_id]
    rows = []
    for row in prepared.rows:
        p, c, r, cut = _fit_pair(_ids(tok, row["prompt"]), _ids(tok, row["chosen"]) + eos,
                                 _ids(tok, row["rejected"]) + eos, cfg.max_len)
        rows.append({"example_id": str(row["pair_id"]), "prompt": row["prompt"],
                     "response": row["chosen"], "rejected": row["rejected"], "input_ids": p,
                     "chosen_ids": c, "rejected_ids": r, "truncated": cut})
    return rows


def _with_scores(ds, cfg: OfflineDataConfig):
    """CSFT: the prompt conditioned on the row's score (`score_template` appended)."""
    if cfg.score_key not in ds.column_names:
        raise ConfigError(f"data.score_key={cfg.score_key!r} not found in dataset "
                          f"{cfg.dataset!r}; its keys are {ds.column_names}")

    def condition(row):
        line = cfg.score_template.format(score=row[cfg.score_key])
        return {cfg.input_key: f"{row[cfg.input_key]}\n{line}"}
    return ds.map(condition)


def _pretrain_rows(ds, tok, cfg: OfflineDataConfig) -> list[dict]:
    rows = []
    for index, row in enumerate(ds):
        ids = _ids(tok, str(row[cfg.input_key])) + [tok.eos_token_id]
        rows.append({"example_id": str(index), "response": str(row[cfg.input_key]),
                     "input_ids": ids[: cfg.max_len], "loss_mask": [1] * min(len(ids), cfg.max_len),
                     "truncated": len(ids) > cfg.max_len})
    return rows


def sft_rows(ds, tok, cfg: OfflineDataConfig, kind: Kind) -> list[dict]:
    if cfg.pretrain_mode:
        return _pretrain_rows(ds, tok, cfg)
    if kind == "csft":
        ds = _with_scores(ds, cfg)
    prepared = prepare_sft(ds, tok, input_key=cfg.input_key, output_key=cfg.output_key,
                           apply_chat_template=cfg.apply_chat_template,
                           input_template=cfg.input_template)
    rows = []
    for row, src in zip(prepared.rows, ds, strict=True):
        ids, mask = row["input_ids"], row["loss_mask"]
        prompt = src[cfg.input_key] if cfg.output_key else None
        response = src[cfg.output_key] if cfg.output_key else row["text"]
        rows.append({"example_id": str(row["sample_id"]),
                     "prompt": prompt if isinstance(prompt, str) else None,
                     "response": response if isinstance(response, str) else row["text"],
                     "input_ids": ids[: cfg.max_len], "loss_mask": mask[: cfg.max_len],
                     "truncated": len(ids) > cfg.max_len})
    return rows


def single_token(tok, text: str, what: str) -> int:
    ids = _ids(tok, text)
    if len(ids) != 1:
        raise ConfigError(f"data.{what}={text!r} is {len(ids)} tokens for this tokenizer; "
                          "expected exactly one")
    return ids[0]


def prm_rows(ds, tok, cfg: OfflineDataConfig) -> list[dict]:
    """Token ids and labels: the label's token id at each placeholder, -100 elsewhere."""
    if cfg.label_key is None or cfg.label_key not in ds.column_names:
        raise ConfigError(f"data.label_key={cfg.label_key!r}: PRM needs a column of per-step "
                          f"labels; dataset keys are {ds.column_names}")
    placeholder = single_token(tok, cfg.placeholder_token, "placeholder_token")
    rows = []
    for index, row in enumerate(ds):
        ids = _ids(tok, str(row[cfg.input_key]))
        steps = [single_token(tok, str(v), "reward_tokens") for v in row[cfg.label_key]]
        labels, k = [], 0
        for t in ids:
            labels.append(steps[k] if t == placeholder and k < len(steps) else -100)
            k += t == placeholder
        if k != len(steps):
            raise ConfigError(f"PRM example {index}: {k} placeholders but {len(steps)} labels")
        rows.append({"example_id": str(index), "response": str(row[cfg.input_key]),
                     "input_ids": ids[: cfg.max_len], "labels": labels[: cfg.max_len],
                     "truncated": len(ids) > cfg.max_len})
    return rows


def build_rows(ds, tok, cfg: OfflineDataConfig, kind: Kind) -> list[dict]:
    if kind in PAIR_KINDS:
        return pair_rows(ds, tok, cfg)
    if kind == "prm":
        return prm_rows(ds, tok, cfg)
    return sft_rows(ds, tok, cfg, kind)


def prepare(cfg: OfflineDataConfig, kind: Kind, tokenizer: str,
            fingerprint: str = "") -> OfflineData:
    """Tokenizes train and eval examples once and commits them with their counts.
    `fingerprint` (of the local data files) only keys the engine's cache."""
    scope = current_scope()
    tok = load_tokenizer(resolve_model(tokenizer), padding_side="right")
    train, evaluation = split_data(cfg)
    splits = {"train": build_rows(train, tok, cfg, kind)}
    if evaluation is not None:
        splits["eval"] = build_rows(evaluation, tok, cfg, kind)
    if len(splits["train"]) == 0:
        raise ConfigError(f"data.dataset={cfg.dataset!r}: no training examples")
    rows = [{**row, "split": name, "position": i}
            for name, part in splits.items() for i, row in enumerate(part)]
    ref = scope.write(OFFLINE_EXAMPLES, _table(rows))
    truncated = sum(r["truncated"] for r in rows)
    metrics = {"data/train": float(len(splits["train"])),
               "data/eval": float(len(splits.get("eval", []))),
               "data/truncated": float(truncated),
               "data/truncated_frac": truncated / len(rows)}
    now = time.time()
    scope.write(METRICS, pa.table({"step": [0] * len(metrics), "key": list(metrics),
                                   "value": list(metrics.values()), "ts": [now] * len(metrics)}))
    return OfflineData((ref,), kind, len(splits["train"]), len(splits.get("eval", [])), metrics)


def _table(rows: list[dict]) -> pa.Table:
    schema = pa.schema([f for f in OFFLINE_EXAMPLES.arrow_schema
                        if f.name not in ("run_id", "task_key")])
    return pa.Table.from_pylist([{k: r.get(k) for k in schema.names} for r in rows], schema=schema)
