"""Prepared examples → padded torch batches, and the forward passes the objectives share.
(Which examples a step reads is the planner's job: `tasks/trainers/plan.py`.)
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from alignflow.artifacts.parquet_io import read_table
from alignflow.tasks.losses.tokens import IGNORE_INDEX, token_logprobs
from alignflow.tasks.offline.records import OfflineData
from alignflow.tasks.offline.tables import OFFLINE_EXAMPLES
from alignflow.tasks.steps.host_api import Trained

# Reading needs the table's schema registered in this process (a worker may import only
# this module): the import above registers it.
assert OFFLINE_EXAMPLES.name == "offline_examples"

Examples = dict[str, list]


def load_examples(store, data: OfflineData) -> dict[str, Examples]:
    """split -> column -> values in position order."""
    table = read_table(store, list(data.refs)).to_pylist()
    out: dict[str, Examples] = {}
    for split in ("train", "eval"):
        rows = sorted((r for r in table if r["split"] == split), key=lambda r: r["position"])
        if rows:
            out[split] = {k: [r[k] for r in rows] for k in rows[0]}
    return out


def pad_right(seqs: Sequence[Sequence[int]], value: int) -> torch.Tensor:
    width = max(len(s) for s in seqs)
    return torch.tensor([list(s) + [value] * (width - len(s)) for s in seqs], dtype=torch.long)


def lm_batch(ids: Sequence[Sequence[int]], masks: Sequence[Sequence[int]], pad_id: int):
    """(input_ids, attention_mask, labels): labels are the ids where the loss mask is 1."""
    input_ids = pad_right(ids, pad_id)
    attention = pad_right([[1] * len(s) for s in ids], 0)
    keep = pad_right(masks, 0).bool()
    return input_ids, attention, input_ids.masked_fill(~keep, IGNORE_INDEX)


def packed_lm_batch(ids: Sequence[Sequence[int]], masks: Sequence[Sequence[int]]):
    """One row of concatenated samples: (input_ids, position_ids restarting per sample,
    labels). A sample's first token is never a label, so nothing leaks across samples."""
    input_ids = torch.tensor([[t for s in ids for t in s]], dtype=torch.long)
    positions = torch.tensor([[i for s in ids for i in range(len(s))]], dtype=torch.long)
    keep = torch.tensor([[bool(m) and j > 0 for mm in masks for j, m in enumerate(mm)]])
    return input_ids, positions, input_ids.masked_fill(~keep, IGNORE_INDEX)


def shifted_logprobs(model, input_ids, attention, labels) -> tuple[torch.Tensor, torch.Tensor]:
    """Per-token log p(label) (B, T-1), 0 where ignored, and the logits that made them."""
    logits = model(input_ids=input_ids, attention_mask=attention, use_cache=False).logits
    logits = logits[:, :-1]
    return token_logprobs(logits, labels[:, 1:]), logits


def response_logps(model, prompts: Sequence[list[int]], responses: Sequence[list[int]],
                   pad_id: int) -> torch.Tensor:
    """(N,) summed log-probs of each response given its prompt (right-padded rows)."""
    ids = [list(p) + list(r) for p, r in zip(prompts, responses, strict=True)]
    masks = [[0] * len(p) + [1] * len(r) for p, r in zip(prompts, responses, strict=True)]
    input_ids, attention, labels = lm_batch(ids, masks, pad_id)
    logp, _ = shifted_logprobs(model, input_ids, attention, labels)
    return logp.sum(-1)


def kl_partner(n: int) -> list[int]:
    """KTO's KL sample of example i: its prompt with example (i+1) mod n's response."""
    return [(i + 1) % n for i in range(n)]


def kl_response(examples: dict, j: int) -> list[int]:
    """Example j's response for a KL sample: its chosen one (an unpaired undesirable example
    has only a rejected one)."""
    return examples["chosen_ids"][j] or examples["rejected_ids"][j]


def host_examples(host: Trained, store, data: OfflineData) -> dict[str, Examples]:
    """The examples of `data`, loaded once per host (they stay between train tasks)."""
    key = ("examples", tuple(r.path for r in data.refs))
    return host.memo(key, lambda: load_examples(store, data))
