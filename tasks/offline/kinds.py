"""What each offline algorithm is: one record per objective, looked up by its name.

A record says how examples are built from a dataset, the loss of one micro-batch, whether
the loss is a token mean or an example mean, which table the consumed examples go to, and
what else training needs (reference log-probs, a teacher, a value head). Adding an
objective means adding one record here and one flow file; nothing else branches on names.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from alignflow.artifacts.schemas import PREFERENCES, SFT_SAMPLES, TableSchema
from alignflow.errors import ConfigError

_ROWS, _LOSSES = "alignflow.tasks.offline.rows", "alignflow.tasks.offline.objectives"


def _code(module: str, name: str) -> Callable[..., Any]:
    return getattr(importlib.import_module(module), name)


@dataclass(frozen=True)
class Objective:
    """The code is named (a function of `rows.py`, of `objectives.py`) and imported where it
    runs: a config check reads the flags, and the driver imports no torch."""

    name: str
    rows_fn: str  # rows.<it>: (dataset, tokenizer, data config) -> examples
    loss_fn: str  # objectives.<it>: (model, idx, context, denominator) -> Out
    token_level: bool  # the step's denominator is loss tokens (else examples)
    table: TableSchema  # where consumed examples and their losses go
    reference: bool = False  # needs reference log-probs of chosen / rejected
    kl_sample: bool = False  # ... and of KTO's mismatched KL sample
    teacher: bool = False  # reads teacher logits (its own worker)
    value_head: bool = False  # trains a scalar head (reward model), not the LM head
    packing: bool = False  # can pack a micro-batch into one row
    step_tokens: bool = False  # reads the step placeholder and reward tokens (PRM)
    eval_loss_fn: str | None = None  # the eval loss (default: the loss)

    @property
    def pairs(self) -> bool:
        return self.table is PREFERENCES

    @property
    def rows(self) -> Callable[..., list[dict]]:
        return _code(_ROWS, self.rows_fn)

    @property
    def loss(self) -> Callable[..., Any]:
        return _code(_LOSSES, self.loss_fn)

    @property
    def eval_loss(self) -> Callable[..., Any] | None:
        return _code(_LOSSES, self.eval_loss_fn) if self.eval_loss_fn else None


OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("sft", "sft_rows", "sft", True, SFT_SAMPLES, packing=True),
    Objective("csft", "csft_rows", "sft", True, SFT_SAMPLES, packing=True),
    Objective("distill", "sft_rows", "distill", True, SFT_SAMPLES, teacher=True,
              eval_loss_fn="sft"),  # no teacher logits at eval: report CE
    Objective("prm", "prm_rows", "prm", False, SFT_SAMPLES, step_tokens=True),
    Objective("rm", "pair_rows", "rm", False, PREFERENCES, value_head=True),
    Objective("dpo", "pair_rows", "dpo", False, PREFERENCES, reference=True,
              eval_loss_fn="dpo_eval"),
    Objective("kto", "kto_rows", "kto", False, PREFERENCES, reference=True,
              kl_sample=True),
)}


def objective(name: str) -> Objective:
    found = OBJECTIVES.get(name)
    if found is None:
        raise ConfigError(f"offline objective {name!r}: expected one of {sorted(OBJECTIVES)}")
    return found
