"""The pretraining-mix (ptx) term of InstructGPT: L = L_RL + ptx_coef · CE(pretraining text).

Each optimizer step of the actor also fits `batch_size` texts of the pretraining data set,
taken in order by the trainer's step count, so a resumed run sees the same texts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from torch import Tensor

from alignflow.artifacts.tensors import pad_right
from alignflow.errors import require
from alignflow.tasks.data.loading import mix_datasets
from alignflow.tasks.data.prompts import require_keys
from alignflow.tasks.losses.tokens import IGNORE_INDEX, ptx_loss
from alignflow.tasks.modeling.device import to_model
from alignflow.tasks.steps.host_api import Trained


@dataclass(frozen=True, kw_only=True)
class PtxConfig:
    """OpenRLHF's `--pretrain_data` / `--ptx_coef`; off while `ptx_coef` is 0."""

    pretrain_data: str | None = None
    pretrain_key: str = "text"
    ptx_coef: float = 0.0
    max_len: int = 256
    batch_size: int = 4
    max_samples: int | None = 10000

    def __post_init__(self) -> None:
        require(math.isfinite(self.ptx_coef) and self.ptx_coef >= 0, "ptx_coef",
                "a finite float >= 0", self.ptx_coef)
        require(not self.enabled or bool(self.pretrain_data), "pretrain_data",
                "a dataset spec when ptx_coef > 0", self.pretrain_data)
        for name in ("max_len", "batch_size"):
            require(getattr(self, name) >= 1, name, "an integer >= 1", getattr(self, name))
        if self.max_samples is not None:
            require(self.max_samples >= 1, "max_samples", "an integer >= 1 or null",
                    self.max_samples)

    @property
    def enabled(self) -> bool:
        return math.isfinite(self.ptx_coef) and self.ptx_coef > 0


def load_pretrain_ids(cfg: PtxConfig, tokenizer) -> list[list[int]]:
    """Token ids of the pretraining texts (truncated to `max_len`), in data-set order."""
    ds = mix_datasets(cfg.pretrain_data, max_samples=cfg.max_samples)
    require_keys(ds, cfg.pretrain_key)
    texts = list(ds[cfg.pretrain_key])
    return [ids[: cfg.max_len] for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]
            if ids]


def pretrain_ids(host: Trained, cfg: PtxConfig) -> list[list[int]]:
    """The host's tokenised pretraining texts for `cfg`, loaded once per host."""
    return host.memo(("ptx", cfg), lambda: load_pretrain_ids(cfg, host.tokenizer))


def ptx_batch(ids: list[list[int]], step: int, batch_size: int) -> list[list[int]]:
    start = step * batch_size
    return [ids[(start + i) % len(ids)] for i in range(batch_size)]


def ptx_term(model, seqs: list[list[int]], pad_id: int) -> Tensor:
    """Token-mean CE of the next token over `seqs` (padding ignored)."""
    ids, mask = to_model(model, *pad_right(seqs, pad_id))
    labels = ids.masked_fill(mask == 0, IGNORE_INDEX)[:, 1:]
    logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits[:, :-1]
    return ptx_loss(logits.float(), labels.contiguous())


def with_ptx(loss: Tensor, model, batch: dict, coef: float, pad_id: int) -> Tensor:
    """Adds the ptx term when this micro-batch carries one (the first of each step)."""
    seqs = batch.get("ptx")
    if not seqs:
        return loss
    return loss + coef * ptx_term(model, seqs, pad_id)

