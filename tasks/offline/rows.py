"""Examples from a dataset, one builder per data shape: preference pairs, SFT texts (CSFT:
conditioned on a score; pretrain mode: loss on every token), PRM steps with labels.

Each builder returns rows of the `offline_examples` table (without split and position).
"""

from __future__ import annotations

from alignflow.errors import ConfigError
from alignflow.tasks.data.pairs import prepare_preferences, prepare_sft
from alignflow.tasks.data.unpaired import prepare_unpaired
from alignflow.tasks.offline.config import OfflineDataConfig


def _ids(tok, text: str) -> list[int]:
    return list(tok(text, add_special_tokens=False)["input_ids"])


def _ids_of(tok, texts: list[str]) -> list[list[int]]:
    """Token ids of many texts in one batched call of the fast tokenizer."""
    return [list(ids) for ids in tok(texts, add_special_tokens=False)["input_ids"]] if texts else []


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
    ids = {key: _ids_of(tok, [row[key] for row in prepared.rows])
           for key in ("prompt", "chosen", "rejected")}
    rows = []
    for i, row in enumerate(prepared.rows):
        p, c, r, cut = _fit_pair(ids["prompt"][i], ids["chosen"][i] + eos,
                                 ids["rejected"][i] + eos, cfg.max_len)
        rows.append({"example_id": str(row["pair_id"]), "prompt": row["prompt"],
                     "response": row["chosen"], "rejected": row["rejected"], "input_ids": p,
                     "chosen_ids": c, "rejected_ids": r, "truncated": cut,
                     "margin": row.get("margin")})
    return rows


def kto_rows(ds, tok, cfg: OfflineDataConfig) -> list[dict]:
    """KTO examples: unpaired rows with a desirable/undesirable `label_key` (OpenRLHF's
    KTO data) when `label_key` is set, else preference pairs (chosen desirable, rejected
    undesirable). An unpaired example fills chosen_ids or rejected_ids, the other is empty."""
    if cfg.label_key is None:
        return pair_rows(ds, tok, cfg)
    prepared = prepare_unpaired(ds, tok, input_key=cfg.input_key, output_key=cfg.output_key,
                                label_key=cfg.label_key,
                                apply_chat_template=cfg.apply_chat_template,
                                input_template=cfg.input_template)
    eos = [] if cfg.apply_chat_template else [tok.eos_token_id]
    rows = []
    for row in prepared.rows:
        p, resp, _, cut = _fit_pair(_ids(tok, row["prompt"]), _ids(tok, row["response"]) + eos,
                                    [], cfg.max_len)
        good = row["desirable"]
        rows.append({"example_id": str(row["example_id"]), "prompt": row["prompt"],
                     "response": row["response"] if good else None,
                     "rejected": None if good else row["response"], "input_ids": p,
                     "chosen_ids": resp if good else [], "rejected_ids": [] if good else resp,
                     "truncated": cut})
    return rows


def csft_rows(ds, tok, cfg: OfflineDataConfig) -> list[dict]:
    """SFT examples whose prompt carries the row's score (`score_template`)."""
    return sft_rows(_with_scores(ds, cfg), tok, cfg)


def _with_scores(ds, cfg: OfflineDataConfig):
    """CSFT: the prompt conditioned on the row's score (`score_template` appended)."""
    if cfg.score_key not in ds.column_names:
        raise ConfigError(f"data.score_key={cfg.score_key!r} not found in dataset "
                          f"{cfg.dataset!r}; its keys are {ds.column_names}")

    def condition(row):
        line = cfg.score_template.format(score=row[cfg.score_key])
        return {cfg.input_key: f"{row[cfg.input_key]}\n{line}"}
    return ds.map(condition)


def pretrain_rows(ds, tok, cfg: OfflineDataConfig) -> list[dict]:
    """SFT's pretrain mode: the `input_key` text is the example, every token a label."""
    rows = []
    for index, row in enumerate(ds):
        ids = _ids(tok, str(row[cfg.input_key])) + [tok.eos_token_id]
        rows.append({"example_id": str(index), "response": str(row[cfg.input_key]),
                     "input_ids": ids[: cfg.max_len], "loss_mask": [1] * min(len(ids), cfg.max_len),
                     "truncated": len(ids) > cfg.max_len})
    return rows


def sft_rows(ds, tok, cfg: OfflineDataConfig) -> list[dict]:
    """Chat (or input/output) SFT examples; loss on the assistant tokens."""
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


