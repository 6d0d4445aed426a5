"""What each offline algorithm is: one record per objective, looked up by its name.

A record says how examples are built from a dataset, the loss of one micro-batch, whether
the loss is a token mean or an example mean, which table the consumed examples go to, and
what else training needs (reference log-probs, a teacher, a value head). Adding an
objective means adding one record here and one flow file; nothing else branches on names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from alignflow.artifacts.schemas import PREFERENCES, SFT_SAMPLES, TableSchema
from alignflow.errors import ConfigError
from alignflow.tasks.offline import objectives, rows


@dataclass(frozen=True)
class Objective:
    name: str
    rows: Callable[..., list[dict]]  # (dataset, tokenizer, data config) -> examples
    loss: Callable[..., objectives.Out]  # (model, idx, context, denominator) -> Out
    token_level: bool  # the step's denominator is loss tokens (else examples)
    table: TableSchema  # where consumed examples and their losses go
    reference: bool = False  # needs reference log-probs of chosen / rejected
    kl_sample: bool = False  # ... and of KTO's mismatched KL sample
    teacher: bool = False  # reads teacher logits (its own worker)
    value_head: bool = False  # trains a scalar head (reward model), not the LM head
    packing: bool = False  # can pack a micro-batch into one row
    step_tokens: bool = False  # reads the step placeholder and reward tokens (PRM)
    eval_loss: Callable[..., objectives.Out] | None = None  # eval loss (default: `loss`)

    @property
    def pairs(self) -> bool:
        return self.table is PREFERENCES


OBJECTIVES: dict[str, Objective] = {o.name: o for o in (
    Objective("sft", rows.sft_rows, objectives.sft, True, SFT_SAMPLES, packing=True),
    Objective("csft", rows.csft_rows, objectives.sft, True, SFT_SAMPLES, packing=True),
    Objective("distill", rows.sft_rows, objectives.distill, True, SFT_SAMPLES, teacher=True,
              eval_loss=objectives.sft),  # no teacher logits at eval: report CE
    Objective("prm", rows.prm_rows, objectives.prm, False, SFT_SAMPLES, step_tokens=True),
    Objective("rm", rows.pair_rows, objectives.rm, False, PREFERENCES, value_head=True),
    Objective("dpo", rows.pair_rows, objectives.dpo, False, PREFERENCES, reference=True,
              eval_loss=objectives.dpo_eval),
    Objective("kto", rows.kto_rows, objectives.kto, False, PREFERENCES, reference=True,
              kl_sample=True),
)}


def objective(name: str) -> Objective:
    found = OBJECTIVES.get(name)
    if found is None:
        raise ConfigError(f"offline objective {name!r}: expected one of {sorted(OBJECTIVES)}")
    return found
